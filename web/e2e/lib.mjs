// What every journey shares: the command line, the run's user, and the watchers that collect
// console errors and CSP violations. Journeys live in `journeys/NN-area.mjs`, each exporting
// `journeys = [[name, async (page, run) => {...}], ...]`; the runner (`../journeys.mjs`) runs the
// files in name order on one signed-in page, so `01-accounts.mjs` (which registers and signs in
// the run's user) comes first and `90-*.mjs` last. `run` carries the browser, the first answer
// of the app and the administrator's credentials (`NUBO_E2E_ADMIN_EMAIL`/`_PASSWORD`).
import path from "node:path";

export function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

export const base = arg("--base", process.env.NUBO_E2E_BASE ?? "").replace(/\/$/, "");
export const shots = arg("--screenshots", null);
export const TIMEOUT = 15_000;
/** The run's own user (each run registers a new one, so a master can be reused). */
export const email = `journey-${Date.now()}-${Math.floor(Math.random() * 1e6)}@example.com`;
export const password = "journey-password-1";

/** Every console error, page error and CSP violation, with the page it happened on. */
export const problems = [];
export const visited = new Set();

export function watch(page) {
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error on ${page.url()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error on ${page.url()}: ${e.message}`));
  page.on("framenavigated", (f) => {
    if (f === page.mainFrame()) visited.add(new URL(f.url()).pathname);
  });
}

export async function shot(page, name) {
  if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

export async function expectPath(page, re) {
  await page.waitForURL((u) => re.test(u.pathname), { timeout: TIMEOUT });
}

/** Sets the files of an upload input once the app enables it (when it knows the folder). */
export async function pick(page, selector, files) {
  await page.locator(`${selector}:not([disabled])`).waitFor({ state: "attached" });
  await page.locator(selector).setInputFiles(files);
}
