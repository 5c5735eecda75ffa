// Reports: an anonymous visitor reports a share through its page; the administrator finds the
// report under Administration → Reports and removes the share; the visitor's link then says the
// share does not exist, and the owner sees it as removed under "My shares".
import { base, shot, expectPath, signIn, watch, TIMEOUT } from "../lib.mjs";

export const journeys = [
  [
    "a visitor reports a share and an administrator removes it",
    async (page, run) => {
      const name = `reported-${Date.now().toString(36)}.txt`;
      // The run's user stores and shares a file through the API (sharing has its own journey).
      const code = await page.evaluate(async (name) => {
        const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
        const headers = { Authorization: `Bearer ${access_token}` };
        const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
        const q = new URLSearchParams({ parent_id: root.folder.id, name });
        const file = await (
          await fetch(`/api/v1/file/content?${q}`, {
            method: "POST",
            headers: { ...headers, "Content-Type": "application/octet-stream" },
            body: "something to report",
          })
        ).json();
        const share = await fetch("/api/v1/share", {
          method: "POST",
          headers: { ...headers, "Content-Type": "application/json" },
          body: JSON.stringify({ object_id: file.id }),
        });
        return (await share.json()).code;
      }, name);
      if (!code) throw new Error("the share was not created");
      const link = `${base}/share/${code}`;

      const anonymous = await run.browser.newContext({ locale: "en-US" });
      try {
        const visitor = await anonymous.newPage();
        visitor.setDefaultTimeout(TIMEOUT);
        // Not watched: the share's 404 at the end is the expected console error.
        await visitor.goto(link);
        await visitor.getByRole("heading", { name }).waitFor();
        await visitor.getByRole("button", { name: "Report" }).click();
        const dialog = visitor.getByRole("dialog", { name: "Report this share" });
        await dialog.getByLabel("Reason").selectOption({ label: "Malware or phishing" });
        await dialog.getByLabel("Details (optional)").fill("The download installs something it should not.");
        await shot(visitor, "share-report");
        await dialog.getByRole("button", { name: "Send report" }).click();
        await dialog.getByRole("status").filter({ hasText: "Thank you." }).waitFor();
        await dialog.getByRole("button", { name: "OK" }).click();

        const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
        try {
          const admin = await context.newPage();
          admin.setDefaultTimeout(TIMEOUT);
          watch(admin);
          await signIn(admin, run.admin);
          await admin.goto(base + "/admin/reports");
          await expectPath(admin, /^\/admin\/reports$/);
          const row = admin.getByRole("row").filter({ hasText: code });
          await row.getByRole("cell", { name: "The download installs something it should not." }).waitFor();
          await row.getByRole("cell", { name: "Malware or phishing" }).waitFor();
          await shot(admin, "admin-reports");
          await row.getByRole("button", { name: `Remove share: share ${code}` }).click();
          await admin.getByRole("dialog").getByRole("button", { name: "Remove share" }).click();
          await admin.getByLabel("State").selectOption({ label: "Handled" });
          await admin.getByRole("row").filter({ hasText: code }).getByText("Share removed").waitFor();
        } finally {
          await context.close();
        }

        await visitor.reload();
        await visitor.getByRole("alert").filter({ hasText: "There is no such share" }).waitFor();
      } finally {
        await anonymous.close();
      }

      await page.goto(base + "/shares");
      await expectPath(page, /^\/shares$/);
      await page.getByRole("row").filter({ hasText: name }).getByText("Removed by an administrator").waitFor();
    },
  ],
];
