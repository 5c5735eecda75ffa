// Installable: the manifest is valid (name, start URL, standalone, 192 and 512 px PNG icons that
// load at their size, a share target), the service worker registers and controls the page, it
// keeps only the app shell (no API answer, no file), an offline start shows the offline page,
// and a file shared from another app to the share target lands in the file browser.
import { base, expected, signedInPage, TIMEOUT } from "../lib.mjs";

async function manifestIsValid(page) {
  const href = await page.locator('link[rel="manifest"]').getAttribute("href");
  const answer = await page.request.get(base + href);
  if (!answer.ok()) throw new Error(`the manifest answers ${answer.status()}`);
  const type = answer.headers()["content-type"] ?? "";
  if (!type.startsWith("application/manifest+json")) throw new Error(`the manifest is served as ${type}`);
  const manifest = await answer.json();
  const want = { name: "Nubo", start_url: "/files", display: "standalone", scope: "/" };
  for (const [key, value] of Object.entries(want)) {
    if (manifest[key] !== value) throw new Error(`the manifest's ${key} is ${JSON.stringify(manifest[key])}`);
  }
  for (const size of [192, 512]) {
    const icon = manifest.icons.find((i) => i.sizes === `${size}x${size}` && i.type === "image/png");
    if (!icon) throw new Error(`the manifest has no ${size} px PNG icon`);
    const drawn = await page.evaluate(async (src) => {
      const image = new Image();
      image.src = src;
      await image.decode();
      return [image.naturalWidth, image.naturalHeight];
    }, icon.src);
    if (drawn[0] !== size || drawn[1] !== size) throw new Error(`${icon.src} is ${drawn.join("×")}`);
  }
  const target = manifest.share_target;
  if (target?.action !== "/share-target" || target.method !== "POST" || target.enctype !== "multipart/form-data") {
    throw new Error(`the share target is ${JSON.stringify(target)}`);
  }
}

async function installable(_page, run) {
  await signedInPage(run, {}, async (page, context) => {
    await manifestIsValid(page);

    // The service worker registers; after a reload it controls the page.
    const scope = await page.evaluate(async () => (await navigator.serviceWorker.ready).scope);
    if (scope !== `${base}/`) throw new Error(`the service worker's scope is ${scope}`);
    await page.reload();
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: TIMEOUT });

    // A file shared from another app: posted to the share target, taken by the file browser.
    const name = `shared-from-a-phone-${Date.now()}.txt`;
    const status = await page.evaluate(async (name) => {
      const form = new FormData();
      form.append("files", new File(["shared bytes\n"], name, { type: "text/plain" }));
      const answer = await fetch("/share-target", { method: "POST", body: form, redirect: "manual" });
      return answer.type === "opaqueredirect" ? "redirect" : String(answer.status);
    }, name);
    if (status !== "redirect") throw new Error(`the share target answered ${status}, not a redirect to the files`);
    await page.goto(base + "/files?shared=1");
    const queue = page.getByRole("region", { name: "Uploads" });
    await queue.getByRole("listitem").filter({ hasText: name }).getByText("Done").waitFor();
    if (new URL(page.url()).search) throw new Error(`the address keeps ${new URL(page.url()).search}`);

    // Only the shell is kept: hashed assets and the offline page, never an API answer.
    const kept = await page.evaluate(async () => {
      const names = await caches.keys();
      const urls = [];
      for (const cacheName of names.filter((n) => n.startsWith("nubo-shell"))) {
        for (const request of await (await caches.open(cacheName)).keys()) urls.push(new URL(request.url).pathname);
      }
      return urls;
    });
    const stray = kept.filter((path) => !path.startsWith("/assets/") && path !== "/offline.html");
    if (stray.length || !kept.includes("/offline.html")) throw new Error(`the shell cache holds ${JSON.stringify(kept)}`);

    // Offline, a page of the app shows the offline page instead of the browser's error.
    await context.setOffline(true);
    await page.goto(base + "/trash").catch(() => undefined);
    await page.getByRole("heading", { name: "You are offline" }).waitFor();
    await context.setOffline(false);
    // The browser logs the failed fetch the worker answered for: the subject here.
    expected("ERR_INTERNET_DISCONNECTED");
  });
}

export const journeys = [["the app is installable, works as a share target and starts offline", installable]];
