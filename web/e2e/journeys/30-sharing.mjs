// Sharing: share an uploaded file with a password through the dialog, open the link in a fresh
// anonymous browser, get the password wrong then right, download and compare the bytes; the
// share is then listed under "My shares". Leaves `run.share` ({ link, password }) for later journeys.
import { readFile } from "node:fs/promises";
import { adminApi, base, shot, expectPath, rowAction, signIn, watch, TIMEOUT } from "../lib.mjs";

export const journeys = [
  [
    "share a file with a password, open it anonymously, download it, compare the bytes",
    async (page, run) => {
      await page.goto(base + "/files");
      await expectPath(page, /^\/files$/);
      const name = `shared-${Date.now()}.bin`;
      const content = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31 + 7) % 256));
      // Stored through the API with the page's own session (the upload UI has its own journeys).
      const stored = await page.evaluate(
        async ({ name, bytes }) => {
          const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
          const headers = { Authorization: `Bearer ${access_token}` };
          const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
          const q = new URLSearchParams({ parent_id: root.folder.id, name });
          const r = await fetch(`/api/v1/file/content?${q}`, {
            method: "POST",
            headers: { ...headers, "Content-Type": "application/octet-stream" },
            body: new Uint8Array(bytes),
          });
          return r.status;
        },
        { name, bytes: [...content] },
      );
      if (stored !== 201 && stored !== 200) throw new Error(`storing the file answered ${stored}`);
      await page.reload();
      await rowAction(page, name, "Share");

      const dialog = page.getByRole("dialog", { name: `Share “${name}”` });
      const password = "open-sesame-4";
      await dialog.getByLabel("Require a password").check();
      await dialog.getByLabel(/^Password/).fill(password);
      await dialog.getByLabel("Download limit (optional)").fill("5");
      await dialog.getByRole("button", { name: "Create link" }).click();
      const linkField = dialog.getByLabel("Link");
      await linkField.waitFor();
      const link = await linkField.inputValue();
      if (!link.startsWith(`${base}/share/`)) throw new Error(`unexpected share link ${link}`);
      await shot(page, "share-dialog");
      await dialog.getByRole("button", { name: "Done" }).click();
      await dialog.waitFor({ state: "hidden" });
      run.share = { link, password, name };

      const anonymous = await run.browser.newContext({ locale: "en-US", acceptDownloads: true });
      try {
        const visitor = await anonymous.newPage();
        visitor.setDefaultTimeout(TIMEOUT);
        await visitor.goto(link);
        await visitor.getByRole("heading", { name: "This share is protected" }).waitFor();
        await visitor.getByLabel("Password").fill("wrong-password");
        await visitor.getByRole("button", { name: "Open" }).click();
        await visitor.getByRole("alert").filter({ hasText: "The password is wrong." }).waitFor();
        await visitor.getByLabel("Password").fill(password);
        await visitor.getByRole("button", { name: "Open" }).click();
        await visitor.getByRole("heading", { name }).waitFor();
        await visitor.getByText(/Shared by /).waitFor();
        await shot(visitor, "share-page");
        const [download] = await Promise.all([
          visitor.waitForEvent("download"),
          visitor.getByRole("button", { name: "Download", exact: true }).click(),
        ]);
        const got = await readFile(await download.path());
        if (!got.equals(content)) throw new Error(`downloaded ${got.length} bytes that differ from the ${content.length} shared`);
        // A reload keeps the grant: no second password prompt.
        await visitor.reload();
        await visitor.getByRole("heading", { name }).waitFor();
      } finally {
        await anonymous.close();
      }

      await page.getByRole("link", { name: "My shares" }).click();
      await expectPath(page, /^\/shares$/);
      const row = page.getByRole("row").filter({ hasText: name });
      await row.getByText("1 / 5").waitFor();
      await shot(page, "my-shares");
    },
  ],
  [
    "another user saves the share into a folder picked in a dialog",
    async (_page, run) => {
      const root = await adminApi(run, "GET", "/directory?limit=1");
      const folderName = `Saved ${Date.now().toString(36)}`;
      const folder = await adminApi(run, "POST", "/directory", { parent_id: root.folder.id, name: folderName });
      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        page.setDefaultTimeout(TIMEOUT);
        watch(page);
        await signIn(page, run.admin);
        await page.goto(run.share.link);
        await page.getByLabel("Password").fill(run.share.password);
        await page.getByRole("button", { name: "Open" }).click();
        await page.getByRole("button", { name: "Save to my files" }).click();
        const picker = page.getByRole("dialog", { name: `Save “${run.share.name}” to…` });
        await picker.getByRole("button", { name: `Open ${folderName}` }).click();
        await picker.getByRole("list", { name: `Folders in ${folderName}` }).waitFor();
        await picker.getByRole("button", { name: "Save here" }).click();
        await page.getByRole("status").filter({ hasText: `Saved to “${folderName}”.` }).waitFor();
      } finally {
        await context.close();
      }
      const listing = await adminApi(run, "GET", `/directory/${encodeURIComponent(folderName)}`);
      if (listing.folder.id !== folder.id || !listing.items.some((o) => o.name === run.share.name)) {
        throw new Error(`${folderName} holds ${listing.items.map((o) => o.name).join(", ")}`);
      }
    },
  ],
  [
    "a share that does not exist says so",
    async (page, run) => {
      const anonymous = await run.browser.newContext({ locale: "en-US" });
      try {
        const visitor = await anonymous.newPage();
        visitor.setDefaultTimeout(TIMEOUT);
        await visitor.goto(base + "/share/no-such-code");
        await visitor.getByRole("alert").filter({ hasText: "There is no such share" }).waitFor();
      } finally {
        await anonymous.close();
      }
    },
  ],
];
