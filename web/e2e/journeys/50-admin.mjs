// Administration: the administrator signs in (fresh context), creates a group and a local
// storage policy through the forms and sees them listed; every other screen opens; a theme
// preset is previewed, made the site default and deleted.
import { base, email, shot, expectPath, watch, adminApi, TIMEOUT } from "../lib.mjs";

export const journeys = [
  [
    "an administrator creates a group and a local storage policy",
    async (_page, run) => {
      if (!run.admin.email || !run.admin.password) throw new Error("NUBO_E2E_ADMIN_EMAIL / _PASSWORD are not set");
      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
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
        const areas = page.getByRole("navigation", { name: "Administration areas" });
        // The dashboard comes first; the run's user is listed under Users.
        await page.getByRole("heading", { name: "Dashboard", level: 2 }).waitFor();
        await areas.getByRole("link", { name: "Users" }).click();
        await expectPath(page, /^\/admin\/users$/);
        await page.getByLabel("Find users").fill(email);
        await page.getByRole("button", { name: "Search" }).click();
        await page.getByRole("cell", { name: email, exact: true }).waitFor();

        const suffix = Date.now().toString(36);
        await areas.getByRole("link", { name: "Groups" }).click();
        await expectPath(page, /^\/admin\/groups$/);
        await page.getByRole("button", { name: "New group" }).click();
        await page.getByLabel("Name", { exact: true }).fill(`Journey group ${suffix}`);
        await page.getByLabel("Storage per member (GiB)").fill("2.5");
        await page.getByLabel("External downloads").check();
        await page.getByLabel("Versions kept per file (0: none)").fill("5");
        await page.getByLabel("Days a version is kept (0: no limit)").fill("0");
        await page.getByRole("button", { name: "Create" }).click();
        const group = page.getByRole("row").filter({ hasText: `Journey group ${suffix}` });
        await group.getByRole("cell", { name: "2.5 GiB" }).waitFor();
        const made = (await adminApi(run, "GET", "/admin/group")).find((g) => g.name === `Journey group ${suffix}`);
        if (made?.version_max_count !== 5 || made?.version_max_days !== 0) {
          throw new Error(`the group keeps versions ${made?.version_max_count} / ${made?.version_max_days} days`);
        }
        // Editing shows what the group keeps.
        await group.getByRole("button", { name: `Edit Journey group ${suffix}` }).click();
        const kept = await page.getByLabel("Versions kept per file (0: none)").inputValue();
        if (kept !== "5") throw new Error(`the group form shows ${kept} versions kept`);
        await page.getByRole("button", { name: "Cancel" }).click();

        await areas.getByRole("link", { name: "Storage policies" }).click();
        await expectPath(page, /^\/admin\/policies$/);
        await page.getByRole("button", { name: "New local policy" }).click();
        await page.getByLabel("Name", { exact: true }).fill(`Journey policy ${suffix}`);
        await page.getByLabel("Folder on the server's disk").fill(`journey-${suffix}`);
        await page.getByLabel("Largest file (MiB, 0 for no limit)").fill("100");
        await page.getByRole("button", { name: "Create" }).click();
        const policy = page.getByRole("row").filter({ hasText: `Journey policy ${suffix}` });
        await policy.getByRole("cell", { name: "100 MiB" }).waitFor();
        await shot(page, "admin-policies");

        for (const [area, path] of [["Storage nodes", "nodes"], ["Tasks", "tasks"], ["Shares", "shares"], ["Files", "files"], ["Site settings", "settings"]]) {
          await areas.getByRole("link", { name: area, exact: true }).click();
          await expectPath(page, new RegExp(`^/admin/${path}$`));
          await page.getByRole("heading", { name: area, level: 2 }).waitFor();
        }
        await areas.getByRole("link", { name: "Site", exact: true }).click();
        await expectPath(page, /^\/admin\/settings\/site$/);
        await page.getByLabel("Site name").waitFor();
        if (await page.getByRole("alert").count()) throw new Error(`an error shows: ${await page.getByRole("alert").first().innerText()}`);

        // A theme preset: previewed while edited, made the site default, then removed again.
        await areas.getByRole("link", { name: "Themes" }).click();
        await expectPath(page, /^\/admin\/themes$/);
        await page.getByRole("button", { name: "New theme" }).click();
        await page.getByLabel("Name", { exact: true }).fill(`Journey theme ${suffix}`);
        const create = page.getByRole("button", { name: "Create" });
        const before = await create.evaluate((el) => getComputedStyle(el).backgroundColor);
        await page.getByLabel("Primary", { exact: true }).selectOption("emerald");
        const previewed = await create.evaluate((el) => getComputedStyle(el).backgroundColor);
        if (previewed === before) throw new Error(`the primary colour is not previewed: still ${before}`);
        await create.click();
        const theme = page.getByRole("row").filter({ hasText: `Journey theme ${suffix}` });
        await theme.getByRole("button", { name: `Make Journey theme ${suffix} the site default` }).click();
        await theme.getByRole("cell", { name: "Default", exact: true }).waitFor();
        const site = await (await fetch(`${base}/api/v1/site/themes`)).json();
        const listed = site.find((p) => p.name === `Journey theme ${suffix}`);
        if (!listed?.is_default || listed.colors.primary !== "emerald") throw new Error(`/site/themes says ${JSON.stringify(listed)}`);
        await shot(page, "admin-themes");
        await theme.getByRole("button", { name: `Delete Journey theme ${suffix}` }).click();
        await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
        await theme.waitFor({ state: "detached" });
      } finally {
        await context.close();
      }
    },
  ],
];
