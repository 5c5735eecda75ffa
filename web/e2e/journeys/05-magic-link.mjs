// Magic links: signed out, the run's user asks for a sign-in link on the sign-in page, the mail
// reaches the test's SMTP sink (aiosmtpd; `NUBO_E2E_MAIL_DIR` is its folder, `NUBO_E2E_SMTP_PORT`
// its port, both set by tests/api/web.rs), and opening the mailed link signs in. Skipped when no
// sink is given.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { base, email, shot, expectPath, TIMEOUT, accountButton, signOut } from "../lib.mjs";

const mailDir = process.env.NUBO_E2E_MAIL_DIR;
const smtpPort = process.env.NUBO_E2E_SMTP_PORT;

/** Changes site settings as the administrator, through the API. */
async function setSettings(run, settings) {
  const json = { "content-type": "application/json" };
  const credentials = { provider: "email_password", identifier: run.admin.email, credential: run.admin.password };
  const login = await fetch(`${base}/api/v1/user/session`, { method: "POST", headers: json, body: JSON.stringify(credentials) });
  if (!login.ok) throw new Error(`administrator sign-in: ${login.status}`);
  const { access_token } = await login.json();
  const headers = { ...json, authorization: `Bearer ${access_token}` };
  const saved = await fetch(`${base}/api/v1/admin/settings`, { method: "PATCH", headers, body: JSON.stringify(settings) });
  if (!saved.ok) throw new Error(`PATCH /admin/settings: ${saved.status} ${await saved.text()}`);
}

/** The sign-in link of the first mail to `to`, once it arrived (paths relative to the site). */
async function mailedLink(to) {
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    for (const name of readdirSync(mailDir).filter((n) => n.endsWith(".eml")).sort()) {
      const mail = readFileSync(path.join(mailDir, name), "utf8");
      if (!mail.includes(`X-Envelope-To: ${to}`)) continue;
      // Undo quoted-printable (soft breaks, `=3D`) in case the text part was encoded.
      const text = mail.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
      const found = text.match(/\/login\/magic\?token=[A-Za-z0-9_-]{43}/);
      if (found) return found[0];
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no sign-in mail to ${to} in ${mailDir}`);
}

export const journeys = [
  [
    "sign out, ask for a sign-in link by mail, open the mailed link and land in the file browser",
    async (page, run) => {
      if (!mailDir || !smtpPort) return void console.log("  (skipped: no SMTP sink given)");
      await setSettings(run, {
        mail_smtp_host: "127.0.0.1",
        mail_smtp_port: smtpPort,
        mail_smtp_tls: "none",
        mail_from: "Nubo <nubo@nubo.test>",
        auth_methods: ["email_password", "magic_link"],
      });
      try {
        await page.goto(base + "/files");
        await signOut(page);
        await expectPath(page, /^\/login$/);
        await page.reload(); // the site configuration (its sign-in methods) is read at start
        await page.getByLabel("E-mail").fill(email);
        await page.getByRole("button", { name: "E-mail me a sign-in link" }).click();
        await page.getByRole("status").filter({ hasText: "sign-in link is on its way" }).waitFor();
        await shot(page, "magic-link-sent");
        const link = await mailedLink(email);
        await page.goto(base + link);
        await expectPath(page, /^\/files$/);
        await accountButton(page).waitFor();
        await page.getByRole("navigation", { name: "Folder path" }).getByText("My files").waitFor();
      } finally {
        await setSettings(run, { auth_methods: ["email_password"] });
      }
    },
  ],
];
