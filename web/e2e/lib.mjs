// What every journey shares: the command line, the run's user, and the watchers that collect
// console errors and CSP violations. Journeys live in `journeys/NN-area.mjs`, each exporting
// `journeys = [[name, async (page, run) => {...}], ...]`; the runner (`../journeys.mjs`) runs the
// files in name order on one signed-in page, so `01-accounts.mjs` (which registers and signs in
// the run's user) comes first and `90-*.mjs` last. `run` carries the browser, the first answer
// of the app and the administrator's credentials (`NUBO_E2E_ADMIN_EMAIL`/`_PASSWORD`).
import path from "node:path";
import { deflateSync } from "node:zlib";

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

/** Takes back one problem naming `fragment` ("status of 409"): the browser logs a refused
 * request as a console error, which is the subject of a journey that provokes it. */
export function expected(fragment) {
  const at = problems.findIndex((p) => p.includes(fragment));
  if (at >= 0) problems.splice(at, 1);
}

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

/** Makes folder `name` in the root and stores `files` ([name, Buffer]) in it through the API as
 * the page's user; answers the ids by name. */
export async function fillFolder(page, name, files) {
  return page.evaluate(
    async ([name, files]) => {
      const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
      const headers = { Authorization: `Bearer ${access_token}` };
      const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
      const made = await fetch("/api/v1/directory", {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json" },
        body: JSON.stringify({ parent_id: root.folder.id, name }),
      });
      if (!made.ok) throw new Error(`making the folder ${name} answered ${made.status}`);
      const folder = await made.json();
      const ids = {};
      for (const [file, base64] of files) {
        const body = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
        const q = new URLSearchParams({ parent_id: folder.id, name: file });
        const res = await fetch(`/api/v1/file/content?${q}`, {
          method: "POST",
          headers: { ...headers, "Content-Type": "application/octet-stream" },
          body,
        });
        if (!res.ok) throw new Error(`storing ${file} answered ${res.status}`);
        ids[file] = (await res.json()).id;
      }
      return ids;
    },
    [name, files.map(([file, bytes]) => [file, Buffer.from(bytes).toString("base64")])],
  );
}

/** The header's account menu (its button names the account: "Account: …"). */
export function accountButton(page) {
  return page.getByRole("button", { name: /^Account: / });
}

/** Signs out through the header's account menu. */
export async function signOut(page) {
  await accountButton(page).click();
  await page.getByRole("menuitem", { name: "Sign out", exact: true }).click();
}

/** Chooses `action` ("Open", "Rename", "Download", "Share", "Delete") in the "⋯" menu of the
 * entry `name` listed in `scope` (the first such entry, or the last with `which`). */
export async function rowAction(scope, name, action, which = "first") {
  const button = scope.getByRole("button", { name: `Actions for ${name}`, exact: true });
  await (which === "last" ? button.last() : button.first()).click();
  const page = typeof scope.page === "function" ? scope.page() : scope;
  await page.getByRole("menu", { name: `Actions for ${name}` }).getByRole("menuitem", { name: action, exact: true }).click();
}

/** Fails when the page is wider than the screen, naming the widest elements that stick out. */
export async function fitsTheScreen(page, where) {
  await page.waitForLoadState("networkidle");
  const { scroll, client, wide } = await page.evaluate(() => {
    const root = document.documentElement;
    const out = (e) => e.getBoundingClientRect().right > root.clientWidth + 1;
    // The innermost ones: an element sticking out whose children all fit is the cause.
    const wide = [...document.querySelectorAll("body *")]
      .filter((e) => out(e) && ![...e.children].some(out))
      .slice(0, 4)
      .map((e) => `${e.tagName.toLowerCase()}.${[...e.classList].join(".")}`);
    return { scroll: root.scrollWidth, client: root.clientWidth, wide };
  });
  if (scroll > client) throw new Error(`${where} is ${scroll} px wide on a ${client} px screen: ${wide.join(", ")}`);
}

/** Fails when `locator` is smaller than a thumb's 44×44 px; answers its box. */
export async function atLeast44(locator, what) {
  const box = await locator.boundingBox();
  if (!box || box.width < 44 || box.height < 44) {
    throw new Error(`${what} is ${box ? `${Math.round(box.width)}×${Math.round(box.height)}` : "not shown"}, under 44×44 px`);
  }
  return box;
}

/** Waits until the window's title starts with `start`. */
export async function titled(page, start) {
  await page.waitForFunction((start) => document.title.startsWith(start), start, { timeout: TIMEOUT }).catch(async () => {
    throw new Error(`the window is titled ${JSON.stringify(await page.title())}, not ${JSON.stringify(start)}…`);
  });
}

/** Sets the files of an upload input once the app enables it (when it knows the folder). */
export async function pick(page, selector, files) {
  await page.locator(`${selector}:not([disabled])`).waitFor({ state: "attached" });
  await page.locator(selector).setInputFiles(files);
}

/** Calls the API as the administrator, straight over HTTP (for a journey's set-up, not its
 * subject); answers the parsed body, or null for 204. */
export async function adminApi(run, method, apiPath, body) {
  run.adminToken ??= await (async () => {
    const login = await fetch(`${base}/api/v1/user/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ provider: "email_password", identifier: run.admin.email, credential: run.admin.password }),
    });
    if (!login.ok) throw new Error(`admin sign-in: ${login.status}`);
    return (await login.json()).access_token;
  })();
  const res = await fetch(`${base}/api/v1${apiPath}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${run.adminToken}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${apiPath}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : res.json();
}

/** Runs `body(page)` on a page of a new browser context (`options`: locale, viewport, touch...)
 * signed in as `who` (default: the run's user), watched like the run's page; closes it after. */
export async function signedInPage(run, options, body, who = { email, password }) {
  const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 }, ...options });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    watch(page);
    await signIn(page, who);
    await body(page, context);
  } finally {
    await context.close();
  }
}

/** Signs in on the sign-in page of `site` (default: the run's base) and waits for the files. */
export async function signIn(page, who, site = base) {
  await page.goto(site + "/login");
  await page.getByLabel("E-mail").fill(who.email);
  await page.getByLabel("Password", { exact: true }).fill(who.password);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await expectPath(page, /^\/files$/);
}

function crc32(bytes) {
  let crc = ~0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return ~crc >>> 0;
}

/** A `width` x `height` RGB PNG whose pixel at (x, y) is `pixel(x, y)` ([r, g, b]). */
export function png(width, height, pixel) {
  const chunk = (type, data) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), body.length + 4);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) rows.set(pixel(x, y), y * (width * 3 + 1) + 1 + x * 3);
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk("IHDR", header), chunk("IDAT", deflateSync(rows)), chunk("IEND", Buffer.alloc(0))]);
}

/** Runs `act` (which changes a paged list's filter) and waits until the page shows the answer it
 * asked for: the first answer of `apiPath` whose query matches every pair of `query`, then that
 * answer's "from–to of count" line under `scope`. Answers the list the server gave, so a journey
 * asserts what it shows against it instead of racing the list shown before. */
export async function filteredList(page, scope, apiPath, query, act) {
  const wanted = (response) => {
    const url = new URL(response.url());
    return url.pathname === apiPath && Object.entries(query).every(([k, v]) => url.searchParams.get(k) === v);
  };
  const [response] = await Promise.all([page.waitForResponse(wanted, { timeout: TIMEOUT }), act()]);
  if (!response.ok()) throw new Error(`${apiPath} answered ${response.status()}`);
  const list = await response.json();
  const shown = list.count ? `1–${list.items.length} of ${list.count}` : "0–0 of 0";
  await scope.getByText(shown, { exact: true }).waitFor();
  return list;
}
