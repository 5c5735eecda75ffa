#!/usr/bin/env node
// Browser journeys of the web app, driven in Debian's Chromium through playwright-core (no
// downloaded browsers). Usage:
//   node web/e2e/journeys.mjs --base http://127.0.0.1:PORT [--screenshots DIR]
// The base URL must serve both the app and /api/v1 (nubo-master, or `vite preview` with its
// proxy). Exit 0 when every journey passes; otherwise the failing journey and why.
// Env: NUBO_CHROMIUM (default /usr/bin/chromium), NUBO_E2E_HEADFUL=1 to watch.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import path from "node:path";

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}
const base = arg("--base", process.env.NUBO_E2E_BASE ?? "").replace(/\/$/, "");
const shots = arg("--screenshots", null);
if (!base) {
  console.error("usage: node journeys.mjs --base http://127.0.0.1:PORT [--screenshots DIR]");
  process.exit(2);
}
if (shots) mkdirSync(shots, { recursive: true });

const TIMEOUT = 15_000;
const email = `journey-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;
const password = "journey-password-1";

/** Every console error, page error and CSP violation, with the page it happened on. */
const problems = [];
const visited = new Set();

function watch(page) {
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error on ${page.url()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error on ${page.url()}: ${e.message}`));
  page.on("framenavigated", (f) => {
    if (f === page.mainFrame()) visited.add(new URL(f.url()).pathname);
  });
}

async function shot(page, name) {
  if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

async function expectPath(page, re) {
  await page.waitForURL((u) => re.test(u.pathname), { timeout: TIMEOUT });
}

const journeys = [
  [
    "register, sign in, land on the file browser, reload and stay signed in",
    async (page) => {
      await page.goto(base + "/");
      await expectPath(page, /^\/login$/);
      await page.getByRole("button", { name: "Sign in" }).waitFor();
      await shot(page, "sign-in");
      await page.getByRole("link", { name: "Register" }).click();
      await expectPath(page, /^\/register$/);
      await page.getByLabel("E-mail").fill(email);
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByLabel("Repeat password").fill(password);
      await shot(page, "register");
      await page.getByRole("button", { name: "Create account" }).click();
      await expectPath(page, /^\/login$/);
      await page.getByRole("status").filter({ hasText: "Account created" }).waitFor();
      if ((await page.getByLabel("E-mail").inputValue()) !== email) throw new Error("e-mail not carried to sign-in");
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await expectPath(page, /^\/files$/);
      await page.getByRole("navigation", { name: "Folder path" }).getByText("My files").waitFor();
      await page.getByText("0 items").waitFor();
      await page.reload();
      await expectPath(page, /^\/files$/);
      await page.getByRole("button", { name: "Sign out" }).waitFor();
      await page.getByText("0 items").waitFor();
    },
  ],
  [
    "create a folder, upload a file into it, rename it, delete it",
    async (page) => {
      await page.getByRole("button", { name: "New folder" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByRole("textbox").fill("Journey folder");
      await dialog.getByRole("button", { name: "New folder" }).click();
      await page.getByRole("link", { name: "Journey folder" }).click();
      await expectPath(page, /^\/files\/Journey%20folder$/);
      await page.getByText("0 items").waitFor();
      const content = Buffer.from("hello from the browser journey\n");
      await page.locator("#upload-input").setInputFiles({ name: "hello.txt", mimeType: "text/plain", buffer: content });
      const queue = page.getByRole("region", { name: "Uploads" });
      await queue.getByText("Done").waitFor({ timeout: TIMEOUT });
      const list = page.getByRole("list", { name: "Contents of Journey folder" });
      await list.getByRole("button", { name: "Download hello.txt" }).first().waitFor();
      await page.getByText("1 item", { exact: true }).waitFor();
      await shot(page, "file-browser");
      await list.getByRole("button", { name: "Rename hello.txt" }).click();
      await dialog.getByRole("textbox").fill("renamed.txt");
      await dialog.getByRole("button", { name: "Rename" }).click();
      await list.getByRole("button", { name: "Rename renamed.txt" }).waitFor();
      if (await list.getByRole("button", { name: "Rename hello.txt" }).count()) throw new Error("old name still listed");
      await list.getByRole("button", { name: "Delete renamed.txt" }).click();
      await dialog.getByRole("button", { name: "Delete" }).click();
      await page.getByText("This folder is empty").waitFor();
      await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: "My files" }).click();
      await expectPath(page, /^\/files$/);
      await page.getByRole("link", { name: "Journey folder" }).waitFor();
    },
  ],
  [
    "no console errors or CSP violations on the pages visited",
    async (page, response) => {
      for (const p of ["/settings", "/no/such/page"]) {
        await page.goto(base + p);
        await page.locator("main").waitFor();
      }
      const csp = response?.headers()["content-security-policy"];
      if (!csp) problems.push("the app's index.html was served without a Content-Security-Policy header");
      if (problems.length) throw new Error(`${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
      console.log(`  pages visited: ${[...visited].join(", ")}`);
    },
  ],
];

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
  let firstResponse = null;
  page.once("response", (r) => (firstResponse = r));
  for (const [name, run] of journeys) {
    const t0 = Date.now();
    try {
      await run(page, firstResponse);
      console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n  at ${page.url()}\n  ${e.message}`);
      await shot(page, `failure-${failed}`).catch(() => undefined);
      if (failed && name.startsWith("register")) break; // later journeys need the session
    }
  }
} finally {
  await browser.close();
}
console.log(`${journeys.length - failed} passed, ${failed} failed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
