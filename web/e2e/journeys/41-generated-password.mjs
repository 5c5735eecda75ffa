// A password the server generated (the first administrator's, printed once in its log): whoever
// signs in with it is asked, on every page, to choose another; once they have, the request goes
// and stays gone after a reload. The test marks such an account (NUBO_E2E_GENERATED_*).
import { base, expectPath, signIn, watch } from "../lib.mjs";

const who = { email: process.env.NUBO_E2E_GENERATED_EMAIL, password: process.env.NUBO_E2E_GENERATED_PASSWORD };
const ASKED = "You signed in with the password the server generated";

export const journeys = who.email
  ? [
      [
        "signed in with a generated password: asked to change it until it is changed",
        async (_page, run) => {
          const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
          try {
            const page = await context.newPage();
            watch(page);
            await signIn(page, who);
            const asked = page.getByRole("alert").filter({ hasText: ASKED });
            await asked.waitFor();
            await asked.getByRole("link", { name: "Change password" }).click();
            await expectPath(page, /^\/settings$/);
            await asked.waitFor();
            const chosen = "a-password-of-my-own";
            await page.getByLabel("Current password").fill(who.password);
            await page.getByLabel("New password", { exact: true }).fill(chosen);
            await page.getByLabel("Repeat the new password").fill(chosen);
            await page.getByRole("button", { name: "Change password" }).click();
            await page.getByRole("status").filter({ hasText: "Password changed." }).waitFor();
            await asked.waitFor({ state: "detached" });
            await page.reload();
            await page.getByRole("heading", { name: "Password" }).waitFor();
            if (await asked.count()) throw new Error("still asked to change the password after changing it");
          } finally {
            await context.close();
          }
        },
      ],
    ]
  : [];
