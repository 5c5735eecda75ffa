#!/usr/bin/env node
// Browser journeys of the web app, driven in Debian's Chromium through playwright-core (no
// downloaded browsers). Usage:
//   node web/e2e/journeys.mjs --base http://127.0.0.1:PORT [--screenshots DIR]
// The base URL must serve both the app and /api/v1 (nubo-master, or `vite preview` with its
// proxy). Runs every `journeys/*.mjs` in name order (see `lib.mjs`). Exit 0 when every journey
// passes; otherwise the failing journeys and why.
// Env: NUBO_CHROMIUM (default /usr/bin/chromium), NUBO_E2E_HEADFUL=1 to watch, NUBO_E2E_ONLY=text
// (or --only text) to run only the files whose name contains it, or any of several comma-separated
// texts (and 01-accounts, which signs in).
import { chromium } from "playwright-core";
import { mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { arg, base, shots, TIMEOUT, watch, shot } from "./lib.mjs";

if (!base) {
  console.error("usage: node journeys.mjs --base http://127.0.0.1:PORT [--screenshots DIR]");
  process.exit(2);
}
if (shots) mkdirSync(shots, { recursive: true });

const folder = path.join(path.dirname(fileURLToPath(import.meta.url)), "journeys");
const only = arg("--only", process.env.NUBO_E2E_ONLY ?? "");
const files = readdirSync(folder)
  .filter((f) => f.endsWith(".mjs") && (f.startsWith("01-") || only.split(",").some((part) => f.includes(part))))
  .sort();
const journeys = [];
for (const file of files) {
  const module = await import(pathToFileURL(path.join(folder, file)).href);
  for (const [name, run] of module.journeys) journeys.push({ file, name, run });
}

const started = Date.now();
const browser = await chromium.launch({
  executablePath: process.env.NUBO_CHROMIUM ?? "/usr/bin/chromium",
  headless: process.env.NUBO_E2E_HEADFUL !== "1",
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
let failed = 0;
try {
  const context = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  context.setDefaultTimeout(TIMEOUT);
  const page = await context.newPage();
  watch(page);
  const run = {
    browser,
    context,
    firstResponse: null,
    admin: { email: process.env.NUBO_E2E_ADMIN_EMAIL, password: process.env.NUBO_E2E_ADMIN_PASSWORD },
  };
  page.once("response", (r) => (run.firstResponse = r));
  for (const { file, name, run: journey } of journeys) {
    const t0 = Date.now();
    try {
      await journey(page, run);
      console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name} [${file}] (${((Date.now() - t0) / 1000).toFixed(1)} s)\n  at ${page.url()}\n  ${e.message}`);
      await shot(page, `failure-${failed}`).catch(() => undefined);
      if (file.startsWith("01-")) break; // the others need the session
    }
  }
} finally {
  await browser.close();
}
console.log(`${journeys.length - failed} passed, ${failed} failed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
