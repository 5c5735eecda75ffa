// OAuth: with GitHub enabled and pointed at the real OAuth server the harness started
// (oauth2-mock-server, `e2e/oauth-server.mjs`, named by NUBO_E2E_OAUTH_URL), a newcomer signs up
// with "Sign in with GitHub" (the browser goes to the server's authorize endpoint and back through
// the callback and the ticket page) and lands in the files; the run's user links a GitHub account
// in Settings → Linked accounts and unlinks it again.
import { adminApi, base, shot, expectPath, watch, TIMEOUT } from "../lib.mjs";

const settings = (run, values) => adminApi(run, "PATCH", "/admin/settings", values);

async function profile(oauth, github) {
  const res = await fetch(`${oauth}/control`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ github }),
  });
  if (!res.ok) throw new Error(`OAuth server control: ${res.status}`);
}

export const journeys = [
  [
    "sign up with GitHub through a real OAuth server, then link and unlink GitHub in Settings",
    async (page, run) => {
      const oauth = process.env.NUBO_E2E_OAUTH_URL;
      if (!oauth) throw new Error("NUBO_E2E_OAUTH_URL is not set: the harness starts an OAuth server for this journey");
      const stamp = Date.now();
      await settings(run, {
        site_url: base,
        auth_methods: ["email_password", "github"],
        github_client_id: "nubo-journey",
        github_client_secret: "mock-secret",
        github_authorize_url: `${oauth}/authorize`,
        github_token_url: `${oauth}/token`,
        github_api_url: oauth,
      });
      try {
        // A newcomer, in a browser of their own.
        const login = `octo-${stamp}`;
        await profile(oauth, {
          id: stamp,
          login,
          name: "Octo",
          emails: [{ email: `${login}@example.com`, primary: true, verified: true }],
        });
        const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
        try {
          const newcomer = await context.newPage();
          newcomer.setDefaultTimeout(TIMEOUT);
          watch(newcomer);
          await newcomer.goto(base + "/login");
          await shot(newcomer, "login-oauth");
          await newcomer.getByRole("link", { name: "Sign in with GitHub" }).click();
          await expectPath(newcomer, /^\/files$/);
          if (new URL(newcomer.url()).search) throw new Error("the ticket stayed in the address bar");
          await newcomer.goto(base + "/settings");
          const list = newcomer.getByRole("list", { name: "Your sign-in methods" });
          await list.getByText(login, { exact: true }).waitFor();
          if ((await newcomer.getByText(`${login}@example.com`).count()) === 0) {
            throw new Error("signed in, but not with the GitHub account's e-mail address");
          }
        } finally {
          await context.close();
        }

        // The run's own user links a GitHub account of their own, then unlinks it.
        const linked = `linked-${stamp}`;
        await profile(oauth, { id: stamp + 1, login: linked, name: "Linked", emails: [] });
        await page.goto(base + "/settings");
        await page.getByRole("button", { name: "Link GitHub" }).click();
        await expectPath(page, /^\/settings$/);
        await page.getByRole("status").filter({ hasText: "GitHub is now linked to your account." }).waitFor();
        const mine = page.getByRole("list", { name: "Your sign-in methods" });
        await mine.getByText(linked, { exact: true }).waitFor();
        await shot(page, "settings-linked-accounts");
        await page.getByRole("button", { name: "Unlink GitHub" }).click();
        await page.getByRole("dialog").getByRole("button", { name: "Unlink" }).click();
        await page.getByRole("status").filter({ hasText: "GitHub was unlinked." }).waitFor();
        await mine.getByText(linked, { exact: true }).waitFor({ state: "detached" });
      } finally {
        await settings(run, { site_url: "", auth_methods: ["email_password"] });
      }
    },
  ],
];
