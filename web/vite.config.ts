// Build and dev-server settings. The build goes to $NUBO_WEB_OUT (set by nubo-master's
// build.rs to cargo's OUT_DIR) or web/dist. Dev and preview proxy /api to a running master
// ($NUBO_DEV_API, default http://127.0.0.1:5299); preview also sends the production CSP so
// the browser journeys catch any inline script or style.
import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";

const api = process.env.NUBO_DEV_API ?? "http://127.0.0.1:5299";
const proxy = { "/api": { target: api, changeOrigin: false } };
// The same as master's `APP_CSP` (master/http/src/web.rs): blob: frames are the PDF viewer.
export const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
  "media-src 'self' blob:; font-src 'self'; connect-src 'self'; frame-src 'self' blob:; worker-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export default defineConfig({
  plugins: [svelte()],
  build: {
    outDir: process.env.NUBO_WEB_OUT ?? "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // Never inline assets as data: URLs into JS/CSS; keeps every asset a hashed file.
    assetsInlineLimit: 0,
    cssCodeSplit: true,
    // No modulepreload polyfill: it is an inline-free module anyway, but we target modern browsers.
    modulePreload: { polyfill: false },
    target: "es2022",
  },
  server: { port: 5173, strictPort: false, proxy },
  preview: { port: 4173, proxy, headers: { "Content-Security-Policy": CSP } },
});
