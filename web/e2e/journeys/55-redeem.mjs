// Redeem codes: the administrator (fresh context) generates a storage-pack code on the "Redeem
// codes" screen, which shows it once; the run's user redeems it in their settings and sees the
// larger capacity and the pack; the administrator finds the pack on the "Storage packs" screen
// and the code listed as used.
import { base, email, shot, expectPath, watch, TIMEOUT } from "../lib.mjs";

/** The total capacity the storage section states, in bytes (from `GET /user/storage`). */
async function capacity(page) {
  return page.evaluate(async () => {
    const tokens = JSON.parse(localStorage.getItem("nubo.session") ?? "null");
    const res = await fetch("/api/v1/user/storage", { headers: { authorization: `Bearer ${tokens?.access_token}` } });
    return (await res.json()).total;
  });
}

export const journeys = [
  [
    "an administrator generates a storage-pack code and a user redeems it for more storage",
    async (page, run) => {
      if (!run.admin.email || !run.admin.password) throw new Error("NUBO_E2E_ADMIN_EMAIL / _PASSWORD are not set");
      const label = `Journey pack ${Date.now().toString(36)}`;
      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
      let code;
      try {
        const admin = await context.newPage();
        admin.setDefaultTimeout(TIMEOUT);
        watch(admin);
        await admin.goto(base + "/login");
        await admin.getByLabel("E-mail").fill(run.admin.email);
        await admin.getByLabel("Password", { exact: true }).fill(run.admin.password);
        await admin.getByRole("button", { name: "Sign in" }).click();
        await expectPath(admin, /^\/files$/);
        await admin.goto(base + "/admin/redeem");
        await admin.getByRole("heading", { name: "Redeem codes", level: 2 }).waitFor();
        await admin.getByLabel("Gives").selectOption("storage_pack");
        await admin.getByLabel("Label").fill(label);
        await admin.getByLabel("Size (GiB)").fill("2");
        await admin.getByLabel("Days it lasts").fill("30");
        await admin.getByLabel("How many codes").fill("1");
        await admin.getByRole("button", { name: "Generate" }).click();
        const codes = admin.getByRole("list", { name: "New codes" });
        code = (await codes.getByRole("listitem").first().innerText()).trim();
        if (!/^[A-HJKMNP-Z2-9]{4}(-[A-HJKMNP-Z2-9]{4}){4}$/.test(code)) throw new Error(`not a code: ${code}`);
        const csv = admin.getByRole("link", { name: "Download CSV" });
        if (!(await csv.getAttribute("href"))?.includes(encodeURIComponent(code))) throw new Error("the CSV lacks the code");
        await shot(admin, "admin-redeem");

        // The run's user redeems it and sees 2 GiB more.
        await page.goto(base + "/settings");
        await expectPath(page, /^\/settings$/);
        const section = page.getByRole("region", { name: "Storage", exact: true });
        await section.getByText("You have no storage packs.").waitFor();
        const before = await capacity(page);
        await section.getByLabel("Code", { exact: true }).fill(code.toLowerCase().replaceAll("-", " "));
        await section.getByRole("button", { name: "Redeem" }).click();
        await section.getByText(/Redeemed: 2\.0 GiB more storage until/).waitFor();
        await section.getByRole("cell", { name: label }).waitFor();
        const after = await capacity(page);
        if (after - before !== 2 * 1024 ** 3) throw new Error(`capacity went from ${before} to ${after}`);
        await section.getByText(/ 2\.0 GiB from storage packs/).waitFor();
        await shot(page, "settings-storage");

        // The administrator sees the pack and the used code.
        await admin.goto(base + "/admin/packs");
        await admin.getByLabel("User", { exact: true }).fill(email);
        await admin.getByRole("button", { name: "Search" }).click();
        await admin.getByRole("row").filter({ hasText: label }).getByRole("cell", { name: "active" }).waitFor();
        await shot(admin, "admin-storage-packs");
        await admin.goto(base + "/admin/redeem");
        await admin.getByRole("row").filter({ hasText: label }).getByRole("cell", { name: "1 / 1" }).waitFor();
        if (await admin.getByRole("alert").count()) throw new Error(`an error shows: ${await admin.getByRole("alert").first().innerText()}`);
      } finally {
        await context.close();
      }
    },
  ],
];
