// Activity: someone tries the run's e-mail address with a wrong password; the user finds the
// failed sign-in under Settings → Activity (and narrows the list to it with the action filter);
// the administrator finds it under Administration → Activity, filters by action and day, and
// downloads the filtered log as CSV.
import { readFile } from "node:fs/promises";
import { base, email, shot, expectPath, filteredList, signIn, watch, TIMEOUT } from "../lib.mjs";

export const journeys = [
  [
    "a failed sign-in shows in the user's and the administrator's activity, and downloads as CSV",
    async (page, run) => {
      // Someone else, from outside the app: a wrong password for the run's address.
      const refused = await fetch(`${base}/api/v1/user/session`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ provider: "email_password", identifier: email, credential: "not-the-password" }),
      });
      if (refused.status !== 401) throw new Error(`the wrong password answered ${refused.status}`);

      await page.goto(base + "/settings");
      await expectPath(page, /^\/settings$/);
      const section = page.getByRole("region", { name: "Activity" });
      await section.getByRole("row").filter({ hasText: "Failed sign-in" }).first().waitFor();
      // Whatever earlier journeys did (or skipped) with this account, the filtered list the page
      // shows is the one the server answered, and every row of it is a failed sign-in.
      const mine = await filteredList(page, section, "/api/v1/user/activity", { action: "user.sign_in_failed" }, () =>
        section.getByLabel("Action").selectOption({ label: "Failed sign-in" }),
      );
      if (!mine.items.length || mine.items.some((e) => e.action !== "user.sign_in_failed")) {
        throw new Error(`the action filter answered ${JSON.stringify(mine.items.map((e) => e.action))}`);
      }
      const only = section.getByRole("row").filter({ hasText: "Failed sign-in" });
      await only.first().getByRole("cell", { name: email }).waitFor();
      const rows = await section.locator("tbody tr").count();
      if (rows !== (await only.count())) throw new Error("the action filter let other actions through");
      await shot(page, "settings-activity");

      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 }, acceptDownloads: true });
      try {
        const admin = await context.newPage();
        admin.setDefaultTimeout(TIMEOUT);
        watch(admin);
        await signIn(admin, run.admin);
        await admin.goto(base + "/admin/activity");
        await expectPath(admin, /^\/admin\/activity$/);
        await admin.getByRole("heading", { name: "Activity" }).waitFor();
        // The administrator's own sign-in is the newest row of all.
        await admin.getByRole("row").filter({ hasText: "Signed in" }).first().waitFor();
        await admin.getByLabel("Action").selectOption({ label: "Failed sign-in" });
        const today = new Date().toISOString().slice(0, 10);
        await admin.getByLabel("From").fill(today);
        await admin.getByLabel("Until").fill(today);
        const filters = { action: "user.sign_in_failed", from: `${today}T00:00:00Z` };
        const everyone = await filteredList(admin, admin, "/api/v1/admin/activity", filters, () =>
          admin.getByRole("button", { name: "Search" }).click(),
        );
        if (everyone.items.some((e) => e.action !== "user.sign_in_failed")) {
          throw new Error(`the administrator's action filter answered ${JSON.stringify(everyone.items.map((e) => e.action))}`);
        }
        const row = admin.getByRole("row").filter({ hasText: email }).first();
        await row.getByRole("cell", { name: "Failed sign-in" }).waitFor();
        await row.getByText("code: auth.invalid_credentials").waitFor();
        if ((await admin.getByRole("row").filter({ hasText: "Signed in" }).count()) !== 0) {
          throw new Error("the action filter let other actions through");
        }
        await shot(admin, "admin-activity");

        const [download] = await Promise.all([
          admin.waitForEvent("download"),
          admin.getByRole("button", { name: "Download CSV" }).click(),
        ]);
        const csv = await readFile(await download.path(), "utf8");
        const [header, ...lines] = csv.trim().split("\r\n");
        if (header !== "at,actor_id,actor_nickname,action,target_kind,target_id,target_name,address,detail") {
          throw new Error(`unexpected CSV header: ${header}`);
        }
        if (!lines.some((l) => l.includes("user.sign_in_failed") && l.includes(email))) {
          throw new Error(`the CSV lacks the failed sign-in:\n${csv}`);
        }
        if (lines.some((l) => l.includes(",user.sign_in,"))) throw new Error("the CSV ignored the filter");
      } finally {
        await context.close();
      }
    },
  ],
];
