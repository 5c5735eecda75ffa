// OpenID Connect: the administrator (fresh context) sets up the OpenID Connect provider on the
// site settings' OAuth providers page (button label, issuer, private-network switch, client id and
// secret; then the method in Sign-in methods, on its own page), pointing it at the real OpenID Connect issuer the harness started
// (oauth2-mock-server, `e2e/oauth-server.mjs`, named by NUBO_E2E_OAUTH_URL); a newcomer then
// signs up with the button that carries that label (the browser goes to the issuer's authorize
// endpoint, back through the callback, where the ID token is checked, and the ticket page),
// lands in the files and finds the identity in Settings → Linked accounts.
import { adminApi, base, shot, expectPath, watch, TIMEOUT } from "../lib.mjs";

const settings = (run, values) => adminApi(run, "PATCH", "/admin/settings", values);

async function control(oauth, body) {
  const res = await fetch(`${oauth}/control`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`OAuth server control: ${res.status}`);
}

async function freshPage(run) {
  const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  watch(page);
  return { context, page };
}

export const journeys = [
  [
    "an administrator sets up OpenID Connect, then a newcomer signs up through it",
    async (_page, run) => {
      const oauth = process.env.NUBO_E2E_OAUTH_URL;
      if (!oauth) throw new Error("NUBO_E2E_OAUTH_URL is not set: the harness starts an OpenID Connect issuer for this journey");
      if (!run.admin.email || !run.admin.password) throw new Error("NUBO_E2E_ADMIN_EMAIL / _PASSWORD are not set");
      const stamp = Date.now();
      await settings(run, { site_url: base });
      try {
        const admin = await freshPage(run);
        try {
          const page = admin.page;
          await page.goto(base + "/login");
          await page.getByLabel("E-mail").fill(run.admin.email);
          await page.getByLabel("Password", { exact: true }).fill(run.admin.password);
          await page.getByRole("button", { name: "Sign in" }).click();
          await expectPath(page, /^\/files$/);
          // Every setting, sign-in method and choice has a human name, never its raw key, on
          // every page of the site settings.
          for (const slug of ["site", "sign-in", "oauth", "captcha"]) {
            await page.goto(`${base}/admin/settings/${slug}`);
            await page.getByRole("button", { name: "Save" }).waitFor();
            const raw = await page.evaluate(() =>
              [...document.querySelectorAll("main label, main legend, main option")]
                .map((e) => e.textContent.trim())
                .filter((text) => /^[a-z]+(_[a-z]+)+$/.test(text) || ["oidc", "qq", "github", "none", "builtin"].includes(text)),
            );
            if (raw.length) throw new Error(`the site settings' ${slug} page shows raw keys: ${raw.join(", ")}`);
          }
          // The OAuth providers have a page of their own, saved alone.
          const areas = page.getByRole("navigation", { name: "Administration areas" });
          await areas.getByRole("link", { name: "OAuth providers", exact: true }).click();
          const oauthGroup = page.getByRole("group", { name: "OAuth providers" });
          await oauthGroup.getByLabel("OpenID Connect button label").fill("Company SSO");
          await oauthGroup.getByLabel("OpenID Connect issuer URL").fill(oauth);
          await oauthGroup.getByLabel("The OpenID Connect issuer is on a private network").check();
          await oauthGroup.getByLabel("OpenID Connect client ID").fill("nubo-journey-oidc");
          await oauthGroup.getByLabel("OpenID Connect client secret").fill("mock-secret");
          await shot(page, "admin-settings-oidc");
          await page.locator("form", { has: oauthGroup }).getByRole("button", { name: "Save" }).click();
          await page.getByRole("status").filter({ hasText: "Settings saved." }).waitFor();
          // Then the sign-in methods, on theirs.
          await areas.getByRole("link", { name: "Sign-in and registration", exact: true }).click();
          const methods = page.getByRole("group", { name: "Sign-in methods" });
          await methods.getByLabel("OpenID Connect", { exact: true }).check();
          await page.locator("form", { has: methods }).getByRole("button", { name: "Save" }).click();
          await page.getByRole("status").filter({ hasText: "Settings saved." }).waitFor();
        } finally {
          await admin.context.close();
        }

        // A newcomer, in a browser of their own.
        const username = `sso-${stamp}`;
        await control(oauth, {
          oidc_mode: null,
          oidc: { sub: `journey-${stamp}`, email: `${username}@example.com`, email_verified: true, preferred_username: username },
        });
        const newcomer = await freshPage(run);
        try {
          const page = newcomer.page;
          await page.goto(base + "/login");
          await shot(page, "login-oidc");
          await page.getByRole("link", { name: "Sign in with Company SSO" }).click();
          await expectPath(page, /^\/files$/);
          if (new URL(page.url()).search) throw new Error("the ticket stayed in the address bar");
          await page.goto(base + "/settings");
          const list = page.getByRole("list", { name: "Your sign-in methods" });
          await list.getByText("Company SSO", { exact: true }).waitFor();
          await list.getByText(username, { exact: true }).waitFor();
          if ((await page.getByText(`${username}@example.com`).count()) === 0) {
            throw new Error("signed in, but not with the ID token's e-mail address");
          }

          // A refused ID token shows its reason on the sign-in page.
          await control(oauth, { oidc_mode: "wrong_audience" });
          await page.context().clearCookies();
          await page.evaluate(() => localStorage.clear());
          await page.goto(base + "/login");
          await page.getByRole("link", { name: "Sign in with Company SSO" }).click();
          await expectPath(page, /^\/login$/);
          await page.getByRole("alert").filter({ hasText: "meant for another application" }).waitFor();
        } finally {
          await control(oauth, { oidc_mode: null });
          await newcomer.context.close();
        }
      } finally {
        await settings(run, { site_url: "", auth_methods: ["email_password"] });
      }
    },
  ],
];
