// Passkeys: with passkeys enabled and the site addressed as `localhost` (browsers refuse a bare
// IP address as a relying party), the run's user adds a passkey in Settings through Chromium's
// virtual authenticator (DevTools `WebAuthn.addVirtualAuthenticator`), signs out, and signs back
// in with the passkey alone, no e-mail address typed.
import { adminApi, base, email, password, shot, expectPath, signIn, watch, TIMEOUT, signOut } from "../lib.mjs";

const settings = (run, values) => adminApi(run, "PATCH", "/admin/settings", values);

export const journeys = [
  [
    "add a passkey in Settings, sign out, and sign in with the passkey alone",
    async (_page, run) => {
      const site = base.replace("127.0.0.1", "localhost");
      await settings(run, { site_url: site, auth_methods: ["email_password", "passkey"] });
      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        page.setDefaultTimeout(TIMEOUT);
        watch(page);
        const devtools = await context.newCDPSession(page);
        await devtools.send("WebAuthn.enable");
        const { authenticatorId } = await devtools.send("WebAuthn.addVirtualAuthenticator", {
          options: {
            protocol: "ctap2",
            transport: "internal",
            hasResidentKey: true,
            hasUserVerification: true,
            isUserVerified: true,
            automaticPresenceSimulation: true,
          },
        });

        await signIn(page, { email, password }, site);

        await page.goto(site + "/settings");
        await page.getByLabel("Name of the new passkey").fill("Journey key");
        await page.getByRole("button", { name: "Add a passkey" }).click();
        await page.getByRole("status").filter({ hasText: "Passkey “Journey key” added." }).waitFor();
        await page.getByRole("list", { name: "Your passkeys" }).getByText("Journey key").waitFor();
        const { credentials } = await devtools.send("WebAuthn.getCredentials", { authenticatorId });
        if (credentials.length !== 1 || !credentials[0].isResidentCredential) {
          throw new Error(`the authenticator holds ${JSON.stringify(credentials)}`);
        }
        await shot(page, "settings-passkeys");

        await signOut(page);
        await expectPath(page, /^\/login$/);
        await page.getByRole("button", { name: "Sign in with a passkey" }).click();
        await expectPath(page, /^\/files$/);
        await page.goto(site + "/settings");
        const list = page.getByRole("list", { name: "Your passkeys" });
        await list.getByText(/last used/).waitFor();
        if ((await page.getByText(email).count()) === 0) throw new Error("signed in, but not as the run's user");
      } finally {
        await context.close();
        await settings(run, { site_url: "", auth_methods: ["email_password"] });
      }
    },
  ],
];
