#!/usr/bin/env node
// The web app's performance targets: Lighthouse's mobile preset (simulated
// throttling: a slow 4G network and a 4x slower CPU) on three pages, and the long tasks of
// dragging the scroll bar through a folder of 10,000 entries.
//
// Seeds a user of its own through the API (once; the state file keeps it for later runs) with a
// folder of 5,000 files, one of 10,000 files and a shared folder of 20 files, then:
//   - Lighthouse on /files/files-5000, on /files (the root) and on the share page /share/CODE
//     (as a visitor; `--pages` may add `root-admin`, the root of NUBO_E2E_ADMIN_EMAIL with
//     NUBO_E2E_ADMIN_PASSWORD, a first administrator's), `--runs` times each, in a fresh Chromium profile per run (signed in by
//     writing the session into localStorage first); prints each run and the medians of the
//     performance score, TBT, LCP, CLS and the longest main-thread task (Lighthouse's simulated
//     figure), the accessibility and best-practices scores and what failed in them; then
//     whether Chromium finds the page installable (`Page.getInstallabilityErrors` once its
//     service worker controls it; Lighthouse 12 no longer audits that);
//   - the drag: a 1280x800 desktop window (scroll bars shown) on /files/files-10000; once every
//     page of the listing is in, the mouse takes the list's scroll bar thumb from the top to the
//     bottom in `--steps` moves, one frame apart, while a PerformanceObserver records 'longtask'
//     entries (installed before the app loads, so the load's tasks are counted apart). `--cpu 4`
//     slows the CPU down 4x for the drag (DevTools' emulation, as Lighthouse's mobile preset).
//
// Usage (the app served with the production CSP, e.g. `npm run build && NUBO_DEV_API=http://127.0.0.1:5305
// npx vite preview --port 4178`, or a master serving its build):
//   node e2e/lighthouse.mjs --base http://127.0.0.1:4178 [--runs 3] [--only lighthouse|drag]
//     [--pages files-5000,root,share] [--steps 120] [--cpu 1] [--state FILE] [--json FILE]
// The state file (default /tmp/nubo-lighthouse-HOST-PORT.json) names the seeded user; delete it
// to seed a new one. Chromium: $NUBO_CHROMIUM or /usr/bin/chromium. Exit 1 when a target is missed.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import lighthouse from "lighthouse";
import * as chromeLauncher from "chrome-launcher";
import { chromium } from "playwright-core";
import { arg, base } from "./lib.mjs";

const RUNS = Number(arg("--runs", "3"));
const ONLY = arg("--only", "all");
const PAGES = arg("--pages", "files-5000,root,share").split(",");
const STEPS = Number(arg("--steps", "120"));
const CPU = Number(arg("--cpu", "1"));
const LH_VERSION = JSON.parse(readFileSync(new URL("../node_modules/lighthouse/package.json", import.meta.url), "utf8")).version;
const CHROMIUM = process.env.NUBO_CHROMIUM ?? "/usr/bin/chromium";
const TARGETS = { performance: 0.9, accessibility: 1, "best-practices": 1, taskMs: 50 };
if (!base) {
  console.error("usage: node e2e/lighthouse.mjs --base http://127.0.0.1:PORT [--runs 3] [--only lighthouse|drag]");
  process.exit(2);
}
const stateFile = arg("--state", `/tmp/nubo-lighthouse-${new URL(base).host.replace(":", "-")}.json`);

async function call(method, path, body, token, type = "application/json") {
  const res = await fetch(base + "/api/v1" + path, {
    method,
    headers: { "Content-Type": type, ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined || body === null ? undefined : type === "application/json" ? JSON.stringify(body) : body,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const password = "lighthouse-password-1";
const signIn = (email, secret = password) =>
  call("POST", "/user/session", { provider: "email_password", identifier: email, credential: secret });

/** A folder of `n` small files (each its own bytes), 32 created at a time. */
async function filesFolder(token, parent, name, n) {
  const folder = await call("POST", "/directory", { parent_id: parent, name }, token);
  const t0 = Date.now();
  for (let i = 0; i < n; i += 32) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 32); k++) {
      const file = `file-${String(k).padStart(5, "0")}.txt`;
      const q = new URLSearchParams({ parent_id: folder.id, name: file });
      batch.push(call("POST", `/file/content?${q}`, `bytes of ${file}\n`, token, "application/octet-stream"));
    }
    await Promise.all(batch);
  }
  console.log(`  ${name}: ${n} files in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return folder;
}

async function seed() {
  if (existsSync(stateFile)) return JSON.parse(readFileSync(stateFile, "utf8"));
  const email = `lighthouse-${Date.now()}@example.com`;
  console.log(`seeding ${email}`);
  await call("POST", "/user", { provider: "email_password", identifier: email, credential: password });
  const token = (await signIn(email)).access_token;
  const root = (await call("GET", "/directory?limit=1", null, token)).folder.id;
  await filesFolder(token, root, "files-5000", 5000);
  await filesFolder(token, root, "files-10000", 10000);
  const shared = await filesFolder(token, root, "shared", 20);
  for (const name of ["Documents", "Photos", "Music"]) await call("POST", "/directory", { parent_id: root, name }, token);
  for (const name of ["notes.md", "todo.txt"]) {
    await call("POST", `/file/content?${new URLSearchParams({ parent_id: root, name })}`, `# ${name}\n`, token, "application/octet-stream");
  }
  const share = await call("POST", "/share", { object_id: shared.id }, token);
  const state = { email, share: share.code };
  writeFileSync(stateFile, JSON.stringify(state));
  return state;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One Lighthouse run in a fresh profile; `session` (or null for a visitor) is put in localStorage first. */
async function lighthouseRun(url, session) {
  const chrome = await chromeLauncher.launch({
    chromePath: CHROMIUM,
    chromeFlags: ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage"],
  });
  let browser;
  try {
    browser = await chromium.connectOverCDP(`http://127.0.0.1:${chrome.port}`);
    const page = await browser.contexts()[0].newPage();
    await page.goto(base + "/offline.html");
    await page.evaluate((pair) => {
      localStorage.clear();
      if (pair) localStorage.setItem("nubo.session", JSON.stringify(pair));
      localStorage.setItem("nubo.files.view", JSON.stringify({ sort: { key: "name", desc: false }, view: "list", props: false }));
    }, session);
    await page.close();
    const result = await lighthouse(url, {
      port: chrome.port,
      output: "json",
      logLevel: "error",
      disableStorageReset: true,
      onlyCategories: ["performance", "accessibility", "best-practices"],
    });
    const lhr = result.lhr;
    const audits = lhr.audits;
    const tasks = audits["long-tasks"]?.details?.items ?? [];
    const failed = (cat) =>
      lhr.categories[cat].auditRefs
        .filter((r) => r.weight > 0 && audits[r.id].score !== null && audits[r.id].score < 1)
        .map((r) => r.id);
    if (lhr.runtimeError) throw new Error(`${url}: ${lhr.runtimeError.message}`);
    return {
      performance: lhr.categories.performance.score,
      accessibility: lhr.categories.accessibility.score,
      bestPractices: lhr.categories["best-practices"].score,
      tbt: audits["total-blocking-time"].numericValue,
      lcp: audits["largest-contentful-paint"].numericValue,
      fcp: audits["first-contentful-paint"].numericValue,
      cls: audits["cumulative-layout-shift"].numericValue,
      longest: tasks.length ? Math.max(...tasks.map((t) => t.duration)) : 0,
      failed: [...failed("accessibility"), ...failed("best-practices")],
      tasks: tasks.slice(0, 5).map((t) => `${t.url?.split("/").pop() || "-"} ${Math.round(t.duration)}`),
      shifts: (audits["layout-shifts"]?.details?.items ?? []).map((i) => `${i.node?.selector ?? "?"} ${i.score.toFixed(3)}`),
    };
  } finally {
    await browser?.close().catch(() => undefined);
    chrome.kill();
  }
}

/** Whether Chromium would offer to install the app from `url`: no installability errors once the worker controls the page. */
async function installability(url, session) {
  // A profile of its own: an incognito context is never installable.
  const profile = mkdtempSync(path.join(tmpdir(), "nubo-lh-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
    locale: "en-US",
  });
  try {
    await context.addInitScript((pair) => pair && localStorage.setItem("nubo.session", JSON.stringify(pair)), session);
    const page = await context.newPage();
    await page.goto(url);
    await page.evaluate(() => navigator.serviceWorker.ready);
    await page.reload();
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
    const cdp = await context.newCDPSession(page);
    const { installabilityErrors } = await cdp.send("Page.getInstallabilityErrors");
    return installabilityErrors.map((e) => e.errorId);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

async function lighthouseAll(state) {
  const urls = { "files-5000": "/files/files-5000", root: "/files", "root-admin": "/files", share: `/share/${state.share}` };
  // The first administrator's root, whose shell asks to change the generated password.
  const admin = { email: process.env.NUBO_E2E_ADMIN_EMAIL, password: process.env.NUBO_E2E_ADMIN_PASSWORD };
  const sessionFor = async (name) =>
    name === "share" ? null : name === "root-admin" ? signIn(admin.email, admin.password) : signIn(state.email);
  const out = {};
  for (const name of PAGES) {
    const runs = [];
    for (let r = 0; r < RUNS; r++) {
      const session = await sessionFor(name);
      const run = await lighthouseRun(base + urls[name], session);
      runs.push(run);
      console.log(
        `${name} run ${r + 1}: performance ${Math.round(run.performance * 100)}, TBT ${Math.round(run.tbt)} ms, ` +
          `LCP ${(run.lcp / 1000).toFixed(2)} s, CLS ${run.cls.toFixed(3)}, longest task ${Math.round(run.longest)} ms ` +
          `[${run.tasks.join(", ")}]; accessibility ${Math.round(run.accessibility * 100)}, best practices ` +
          `${Math.round(run.bestPractices * 100)}${run.failed.length ? ` (failed: ${run.failed.join(", ")})` : ""}` +
          (run.shifts.length ? `; shifts: ${run.shifts.join(", ")}` : ""),
      );
    }
    const m = (k) => median(runs.map((r) => r[k]));
    const errors = await installability(base + urls[name], await sessionFor(name));
    out[name] = {
      performance: m("performance"),
      tbt: m("tbt"),
      lcp: m("lcp"),
      cls: m("cls"),
      longest: m("longest"),
      accessibility: m("accessibility"),
      bestPractices: m("bestPractices"),
      installable: errors.length === 0,
      installabilityErrors: errors,
    };
  }
  console.log(`\nmedians of ${RUNS} (Lighthouse ${LH_VERSION}, mobile preset):`);
  console.log("page        perf   TBT ms  LCP s  CLS    longest ms  a11y  best-pr  installable");
  for (const [name, r] of Object.entries(out)) {
    console.log(
      `${name.padEnd(11)} ${String(Math.round(r.performance * 100)).padStart(4)} ${String(Math.round(r.tbt)).padStart(8)} ` +
        `${(r.lcp / 1000).toFixed(2).padStart(6)}  ${r.cls.toFixed(3)} ${String(Math.round(r.longest)).padStart(11)} ` +
        `${String(Math.round(r.accessibility * 100)).padStart(5)} ${String(Math.round(r.bestPractices * 100)).padStart(8)}  ` +
        `${r.installable ? "yes" : "no: " + r.installabilityErrors.join(", ")}`,
    );
  }
  return out;
}

/** One drag of the scroll bar through the 10,000-file folder; the long tasks of the load and of the drag. */
async function dragRun(state) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
    ignoreDefaultArgs: ["--hide-scrollbars"],
  });
  try {
    const context = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
    await context.addInitScript((pair) => {
      localStorage.setItem("nubo.session", JSON.stringify(pair));
      localStorage.setItem("nubo.files.view", JSON.stringify({ sort: { key: "name", desc: false }, view: "list", props: false }));
      window.__longtasks = [];
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__longtasks.push(e.duration);
      }).observe({ type: "longtask", buffered: true });
    }, await signIn(state.email));
    const page = await context.newPage();
    await page.goto(base + "/files/files-10000");
    const list = page.getByRole("list", { name: "Contents of files-10000" });
    await page.getByText("10000 items").waitFor({ timeout: 120_000 });
    await page.waitForTimeout(300);
    const loadTasks = await page.evaluate(() => window.__longtasks.splice(0));
    if (CPU > 1) await (await context.newCDPSession(page)).send("Emulation.setCPUThrottlingRate", { rate: CPU });

    // The thumb starts at the top of the track (below the arrow button), at the viewport's right edge.
    const box = await list.boundingBox();
    const bar = await list.evaluate((v) => v.offsetWidth - v.clientWidth);
    if (!bar) throw new Error("the list shows no scroll bar");
    const x = box.x + box.width - bar / 2;
    const [top, bottom] = [box.y + bar + 5, box.y + box.height - bar - 5];
    await page.mouse.move(x, top);
    await page.mouse.down();
    for (let i = 1; i <= STEPS; i++) {
      await page.mouse.move(x, top + ((bottom - top) * i) / STEPS);
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    }
    await page.mouse.up();
    await page.waitForTimeout(300);
    const scrolled = await list.evaluate((v) => (v.scrollTop + v.clientHeight) / v.scrollHeight);
    if (scrolled < 0.95) throw new Error(`the drag did not take the scroll bar down (${Math.round(scrolled * 100)}% reached)`);
    await list.getByText("file-09999.txt").waitFor();
    const dragTasks = await page.evaluate(() => window.__longtasks.splice(0));
    const longest = (ts) => (ts.length ? Math.max(...ts) : 0);
    return {
      loadTasks: loadTasks.length,
      loadLongest: longest(loadTasks),
      dragTasks: dragTasks.length,
      dragLongest: longest(dragTasks),
      over: dragTasks.filter((d) => d > TARGETS.taskMs).length,
    };
  } finally {
    await browser.close();
  }
}

async function dragAll(state) {
  const runs = [];
  for (let r = 0; r < RUNS; r++) {
    const run = await dragRun(state);
    runs.push(run);
    console.log(
      `drag run ${r + 1}: load of 10,000 files ${run.loadTasks} long tasks (longest ${Math.round(run.loadLongest)} ms); ` +
        `drag through them ${run.dragTasks} long tasks (longest ${Math.round(run.dragLongest)} ms, ${run.over} over ${TARGETS.taskMs} ms)`,
    );
  }
  const m = (k) => median(runs.map((r) => r[k]));
  const out = { loadTasks: m("loadTasks"), loadLongest: m("loadLongest"), dragTasks: m("dragTasks"), dragLongest: m("dragLongest") };
  console.log(
    `drag medians of ${RUNS}${CPU > 1 ? ` (CPU ${CPU}x slower)` : ""}: load ${out.loadTasks} long tasks, longest ${Math.round(out.loadLongest)} ms; ` +
      `drag ${out.dragTasks} long tasks, longest ${Math.round(out.dragLongest)} ms`,
  );
  return out;
}

const state = await seed();
const report = {};
if (ONLY !== "drag") report.lighthouse = await lighthouseAll(state);
if (ONLY !== "lighthouse") report.drag = await dragAll(state);
const json = arg("--json", null);
if (json) writeFileSync(json, JSON.stringify(report, null, 2));
const missed =
  Object.values(report.lighthouse ?? {}).some(
    (r) => r.performance < TARGETS.performance || r.accessibility < 1 || r.bestPractices < 1 || !r.installable,
  ) || (report.drag && report.drag.dragLongest > TARGETS.taskMs);
process.exit(missed ? 1 : 0);
