// The administration dashboard: the journey registers two people, bans one, stores three files
// (one of them twice over, so it is stored once) and shares a folder through the API; the
// administrator then opens /admin and sees every figure moved by exactly what the journey
// created, today's bars included, and opens the uploader's detail from the users list.
import { base, shot, expectPath, watch, adminApi, TIMEOUT } from "../lib.mjs";

const api = async (method, path, token, body, type = "application/json") => {
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { "content-type": type, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : type === "application/json" ? JSON.stringify(body) : body,
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : res.json();
};

const random = (n) => crypto.getRandomValues(new Uint8Array(n));

export const journeys = [
  [
    "an administrator's dashboard shows what the journey created",
    async (_page, run) => {
      if (!run.admin.email || !run.admin.password) throw new Error("NUBO_E2E_ADMIN_EMAIL / _PASSWORD are not set");
      const before = await adminApi(run, "GET", "/admin/summary");
      const stamp = Date.now().toString(36);
      const people = [`summary-a-${stamp}@example.com`, `summary-b-${stamp}@example.com`];
      for (const identifier of people) {
        await api("POST", "/user", null, { provider: "email_password", identifier, credential: "summary-password-1" });
      }
      const session = await api("POST", "/user/session", null, { provider: "email_password", identifier: people[0], credential: "summary-password-1" });
      const token = session.access_token;
      const root = (await api("GET", "/directory", token)).folder.id;
      const folder = await api("POST", "/directory", token, { parent_id: root, name: "Summary journey" });
      const same = random(1234);
      const other = random(4321);
      for (const [name, bytes] of [["one.bin", same], ["two.bin", other], ["one-again.bin", same]]) {
        await api("POST", `/file/content?parent_id=${folder.id}&name=${name}`, token, bytes, "application/octet-stream");
      }
      await api("POST", "/share", token, { object_id: folder.id });
      const banned = (await adminApi(run, "GET", `/admin/user?email_contains=${encodeURIComponent(people[1])}`)).items[0];
      await adminApi(run, "PATCH", `/admin/user/${banned.id}`, { status: "BANNED" });

      const logical = 2 * same.length + other.length;
      const physical = same.length + other.length;
      const expected = {
        users_total: before.users.total + 2,
        users_active: before.users.active + 1,
        users_banned: before.users.banned + 1,
        users_new_24h: before.users.new_24h + 2,
        files: before.objects.files + 3,
        folders: before.objects.folders + 1,
        shares: before.shares + 1,
        logical_bytes: before.storage.logical_bytes + logical,
        physical_bytes: before.storage.physical_bytes + physical,
      };
      const today = before.daily[before.daily.length - 1];

      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 900 } });
      try {
        const page = await context.newPage();
        page.setDefaultTimeout(TIMEOUT);
        watch(page);
        await page.goto(base + "/login");
        await page.getByLabel("E-mail").fill(run.admin.email);
        await page.getByLabel("Password", { exact: true }).fill(run.admin.password);
        await page.getByRole("button", { name: "Sign in" }).click();
        await expectPath(page, /^\/files$/);
        await page.getByRole("link", { name: "Administration" }).click();
        await expectPath(page, /^\/admin$/);
        await page.getByRole("heading", { name: "Dashboard", level: 2 }).waitFor();
        for (const [figure, value] of Object.entries(expected)) {
          const shown = await page.locator(`dd[data-figure="${figure}"]`).getAttribute("data-value");
          if (Number(shown) !== value) throw new Error(`${figure}: the dashboard shows ${shown}, expected ${value}`);
        }
        // Counts read as numbers on the page, not only in attributes.
        const files = await page.locator('dd[data-figure="files"]').innerText();
        if (files.replace(/\D/g, "") !== String(expected.files)) throw new Error(`files reads "${files}"`);
        // Today's bars: two registrations and three files more than before.
        await page.getByRole("figure", { name: /Registrations per day/ }).waitFor();
        const chartOf = async (name) => (await page.getByRole("figure", { name }).locator(`rect[data-day="${today.date}"]`).getAttribute("data-value"));
        if (Number(await chartOf(/Registrations per day/)) !== today.registrations + 2) throw new Error("today's registrations bar");
        if (Number(await chartOf(/Files added per day/)) !== today.uploads + 3) throw new Error("today's uploads bar");
        if (Number(await chartOf(/Bytes added per day/)) !== today.upload_bytes + logical) throw new Error("today's bytes bar");
        await shot(page, "admin-summary");

        // The uploader's detail, from the users list.
        const areas = page.getByRole("navigation", { name: "Administration areas" });
        await areas.getByRole("link", { name: "Users" }).click();
        await page.getByLabel("Find users").fill(people[0]);
        await page.getByRole("button", { name: "Search" }).click();
        await page.getByRole("link", { name: people[0] }).click();
        await expectPath(page, /^\/admin\/users\/[0-9a-f-]+$/);
        await page.getByRole("cell", { name: people[0] }).waitFor();
        const detail = { files: 3, folders: 1, shares: 1, storage_used: logical };
        for (const [figure, value] of Object.entries(detail)) {
          const shown = await page.locator(`dd[data-figure="${figure}"]`).getAttribute("data-value");
          if (Number(shown) !== value) throw new Error(`user ${figure}: shows ${shown}, expected ${value}`);
        }
        await shot(page, "admin-user-detail");
      } finally {
        await context.close();
      }
    },
  ],
];
