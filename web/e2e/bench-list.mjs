#!/usr/bin/env node
// The 10,000-entry budget of the file browser: seeds a folder of 10,000 entries
// through the API (a new user each run; `POST /directory` in parallel batches, the cheapest
// create the API has), opens it in Debian's Chromium, scrolls the list from top to bottom with
// the mouse wheel, and reports the time until the folder is listed (first rows, then all
// 10,000 loaded) and the long tasks (PerformanceObserver 'longtask', installed before the app
// loads). Budget: no task over 50 ms while scrolling. Not a journey: run it by hand or in CI.
//   node web/e2e/bench-list.mjs --base http://127.0.0.1:PORT [--entries 10000] [--user EMAIL] [--screenshot FILE]
// Exit 1 when a task during the scroll exceeds the budget.
import { chromium } from "playwright-core";
import { arg, base } from "./lib.mjs";

const ENTRIES = Number(arg("--entries", "10000"));
const BATCH = 64;
const BUDGET_MS = 50;
if (!base) {
  console.error("usage: node bench-list.mjs --base http://127.0.0.1:PORT [--entries N]");
  process.exit(2);
}

async function call(method, path, body, token) {
  const res = await fetch(base + "/api/v1" + path, {
    method,
    headers: { "Content-Type": "application/json", ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// A user of its own, signed in through the API; `--user EMAIL` reuses an earlier run's user and folder.
const reuse = arg("--user", null);
const email = reuse ?? `bench-${Date.now()}@example.com`;
const password = "bench-password-1";
if (!reuse) await call("POST", "/user", { provider: "email_password", identifier: email, credential: password });
const tokens = await call("POST", "/user/session", { provider: "email_password", identifier: email, credential: password });
const token = tokens.access_token;
if (!reuse) {
  const root = await call("GET", "/directory?limit=1", null, token);
  const folder = await call("POST", "/directory", { parent_id: root.folder.id, name: "bench" }, token);
  const t0 = Date.now();
  const names = Array.from({ length: ENTRIES }, (_, i) => `entry-${String(i).padStart(5, "0")}`);
  for (let i = 0; i < names.length; i += BATCH) {
    await Promise.all(
      names.slice(i, i + BATCH).map((name) => call("POST", "/directory", { parent_id: folder.id, name }, token)),
    );
  }
  const secs = (Date.now() - t0) / 1000;
  console.log(`seeded ${ENTRIES} entries for ${email} in ${secs.toFixed(1)} s (${Math.round(ENTRIES / secs)}/s)`);
}

const browser = await chromium.launch({
  executablePath: process.env.NUBO_CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
let over = 0;
try {
  const context = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  await context.addInitScript((pair) => {
    localStorage.setItem("nubo.session", JSON.stringify(pair));
    localStorage.setItem("nubo.files.view", JSON.stringify({ sort: { key: "name", desc: false }, view: "list", props: false }));
    window.__longtasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longtasks.push({ start: e.startTime, duration: e.duration });
    }).observe({ type: "longtask", buffered: true });
  }, tokens);
  const page = await context.newPage();
  let t0 = Date.now();
  await page.goto(base + "/files/bench");
  const list = page.getByRole("list", { name: "Contents of bench" });
  await list.getByText("entry-00000").waitFor({ timeout: 60_000 });
  const firstRows = Date.now() - t0;
  await page.getByText(`${ENTRIES.toLocaleString("en-US").replace(/,/g, "")} items`).waitFor({ timeout: 120_000 });
  const allLoaded = Date.now() - t0;
  const rendered = await list.getByRole("listitem").count();
  const loadTasks = await page.evaluate(() => window.__longtasks.splice(0));

  // Scroll from top to bottom with the wheel, one frame between steps.
  const box = await list.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  t0 = Date.now();
  let steps = 0;
  for (;;) {
    await page.mouse.wheel(0, 600);
    steps++;
    const done = await page.evaluate(
      () =>
        new Promise((r) =>
          requestAnimationFrame(() => {
            const v = document.querySelector('[role="list"]');
            r(v.scrollTop + v.clientHeight >= v.scrollHeight - 2);
          }),
        ),
    );
    if (done || steps > 20_000) break;
  }
  const scrollMs = Date.now() - t0;
  await list.getByText(`entry-${String(ENTRIES - 1).padStart(5, "0")}`).waitFor();
  await page.waitForTimeout(200);
  const scrollTasks = await page.evaluate(() => window.__longtasks.splice(0));
  const shotFile = arg("--screenshot", null);
  if (shotFile) await page.screenshot({ path: shotFile });

  const longest = (ts) => (ts.length ? Math.max(...ts.map((t) => t.duration)) : 0);
  over = scrollTasks.filter((t) => t.duration > BUDGET_MS).length;
  console.log(`folder of ${ENTRIES}: first rows after ${firstRows} ms, all ${ENTRIES} loaded after ${allLoaded} ms, ${rendered} rows in the DOM`);
  console.log(`  while loading: ${loadTasks.length} long tasks, longest ${longest(loadTasks).toFixed(0)} ms`);
  console.log(`scroll top to bottom: ${steps} wheel steps in ${(scrollMs / 1000).toFixed(1)} s; ${scrollTasks.length} long tasks, longest ${longest(scrollTasks).toFixed(0)} ms, ${over} over ${BUDGET_MS} ms`);
} finally {
  await browser.close();
}
process.exit(over ? 1 : 0);
