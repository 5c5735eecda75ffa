// Entry point: global styles, then the app shell.
import "./app.css";
import { mount } from "svelte";
import App from "./App.svelte";

mount(App, { target: document.getElementById("app")! });

// The service worker keeps the app shell for offline starts and receives files shared from
// other apps (public/sw.js). Not in development, where the files change on every save.
if (import.meta.env.PROD && "serviceWorker" in navigator) {
  navigator.serviceWorker.register("/sw.js").catch(() => undefined);
}
