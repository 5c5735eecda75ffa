// The file browser: folders, uploads, rename, delete; selection, the folder picker, the trash.
import { readFileSync } from "node:fs";
import { base, shot, expectPath, pick, rowAction, TIMEOUT } from "../lib.mjs";

export const journeys = [
  [
    "create a folder, upload a file into it, rename it, delete it",
    async (page) => {
      await page.getByRole("button", { name: "New folder" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByRole("textbox").fill("Journey folder");
      await dialog.getByRole("button", { name: "New folder" }).click();
      await page.getByRole("link", { name: "Journey folder" }).click();
      await expectPath(page, /^\/files\/Journey%20folder$/);
      await page.getByText("0 items").waitFor();
      const content = Buffer.from("hello from the browser journey\n");
      await pick(page, "#upload-input", { name: "hello.txt", mimeType: "text/plain", buffer: content });
      const queue = page.getByRole("region", { name: "Uploads" });
      await queue.getByText("Done").waitFor({ timeout: TIMEOUT });
      const list = page.getByRole("list", { name: "Contents of Journey folder" });
      await list.getByRole("button", { name: "Actions for hello.txt" }).first().waitFor();
      await page.getByText("1 item", { exact: true }).waitFor();
      await shot(page, "file-browser");
      await rowAction(list, "hello.txt", "Rename");
      await dialog.getByRole("textbox").fill("renamed.txt");
      await dialog.getByRole("button", { name: "Rename" }).click();
      await list.getByRole("button", { name: "Actions for renamed.txt" }).waitFor();
      if (await list.getByRole("button", { name: "Actions for hello.txt" }).count()) throw new Error("old name still listed");
      await rowAction(list, "renamed.txt", "Delete");
      await dialog.getByRole("button", { name: "Delete" }).click();
      await page.getByText("This folder is empty").waitFor();
      await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: "My files" }).click();
      await expectPath(page, /^\/files$/);
      await page.getByRole("link", { name: "Journey folder" }).waitFor();
    },
  ],
  [
    "rename, move, trash, restore",
    async (page) => {
      await page.goto(base + "/files");
      const dialog = page.getByRole("dialog");
      for (const name of ["Move source", "Move target"]) {
        await page.getByRole("button", { name: "New folder" }).click();
        await dialog.getByRole("textbox").fill(name);
        await dialog.getByRole("button", { name: "New folder" }).click();
        await page.getByRole("link", { name }).waitFor();
      }
      // Keyboard selection: ctrl+A selects everything listed, Escape clears.
      const root = page.getByRole("list", { name: "Contents of My files" });
      await root.getByRole("checkbox", { name: "Select Move source" }).click();
      await page.keyboard.press("Control+a");
      // The count line is empty while the listing reloads (a change event from the new folders
      // can start one): read it once it holds a number.
      const counted = page.getByRole("status").filter({ hasText: /\d/ }).first();
      const count = Number((await counted.textContent()).match(/\d+/)[0]);
      await page.getByRole("toolbar", { name: "Selected items" }).getByText(`${count} selected`).waitFor();
      await page.keyboard.press("Escape");
      await page.getByRole("toolbar", { name: "Selected items" }).waitFor({ state: "detached" });

      await page.getByRole("link", { name: "Move source" }).click();
      await expectPath(page, /^\/files\/Move%20source$/);
      await page.getByText("This folder is empty").waitFor();
      await pick(page, "#upload-input", { name: "move-me.txt", mimeType: "text/plain", buffer: Buffer.from("move me\n") });
      const list = page.getByRole("list", { name: "Contents of Move source" });
      await list.getByRole("checkbox", { name: "Select move-me.txt" }).waitFor();
      // F2 on the focused row renames it.
      await list.getByRole("checkbox", { name: "Select move-me.txt" }).click();
      await page.keyboard.press("F2");
      await dialog.getByRole("textbox").fill("moved.txt");
      await dialog.getByRole("button", { name: "Rename" }).click();
      await list.getByRole("checkbox", { name: "Select moved.txt" }).waitFor();
      // The properties panel shows the focused file.
      await page.getByRole("button", { name: "Show properties" }).click();
      const props = page.getByRole("region", { name: "Properties" });
      await props.getByText("/Move source/moved.txt").waitFor();
      // The panel holds what the row's one menu offers; the row has no row of icons.
      const acts = props.getByRole("group", { name: "Actions for moved.txt" });
      for (const action of ["Open", "Rename", "Download", "Share", "Delete", "Versions"]) {
        await acts.getByRole("button", { name: action, exact: true }).waitFor();
      }
      const buttons = await list.getByRole("listitem").filter({ hasText: "moved.txt" }).getByRole("button").count();
      if (buttons !== 1) throw new Error(`the row has ${buttons} buttons, not its one menu`);
      await list.getByRole("checkbox", { name: "Select moved.txt" }).check();
      const tools = page.getByRole("toolbar", { name: "Selected items" });
      await tools.getByText("1 selected").waitFor();
      await shot(page, "file-selection");
      await tools.getByRole("button", { name: "Move…" }).click();
      await dialog.getByRole("button", { name: "Open Move target" }).click();
      await dialog.getByRole("list", { name: "Folders in Move target" }).waitFor();
      await shot(page, "folder-picker");
      await dialog.getByRole("button", { name: "Move here" }).click();
      await page.getByText("This folder is empty").waitFor();
      await page.getByRole("button", { name: "Show properties" }).click();

      await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: "My files" }).click();
      await page.getByRole("link", { name: "Move target" }).click();
      await expectPath(page, /^\/files\/Move%20target$/);
      const target = page.getByRole("list", { name: "Contents of Move target" });
      await target.getByRole("checkbox", { name: "Select moved.txt" }).click();
      // The Delete key trashes the selection (after a confirmation).
      await page.keyboard.press("Delete");
      await dialog.getByRole("button", { name: "Delete" }).click();
      await page.getByText("This folder is empty").waitFor();

      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Trash" }).click();
      await expectPath(page, /^\/trash$/);
      const trash = page.getByRole("list", { name: "Items in the trash" });
      await trash.getByRole("button", { name: "Restore moved.txt" }).first().waitFor();
      await shot(page, "trash");
      await trash.getByRole("button", { name: "Restore moved.txt" }).first().click();
      await page.getByText("Restored “moved.txt” to /Move target.").waitFor();
      await page.goto(base + "/files/Move%20target");
      await page.getByRole("list", { name: "Contents of Move target" }).getByRole("checkbox", { name: "Select moved.txt" }).waitFor({ timeout: TIMEOUT });
      await page.getByText("1 item", { exact: true }).waitFor();

      // Copy it back into the first folder: both folders then hold it.
      await page.getByRole("list", { name: "Contents of Move target" }).getByRole("checkbox", { name: "Select moved.txt" }).click();
      await page.getByRole("toolbar", { name: "Selected items" }).getByRole("button", { name: "Copy…" }).click();
      await dialog.getByRole("button", { name: "Open Move source" }).click();
      await dialog.getByRole("list", { name: "Folders in Move source" }).waitFor();
      const copied = page.waitForResponse((r) => r.url().endsWith("/api/v1/object/copies") && r.status() === 201);
      await dialog.getByRole("button", { name: "Copy here" }).click();
      await copied;
      await page.goto(base + "/files/Move%20source");
      await page.getByRole("list", { name: "Contents of Move source" }).getByRole("checkbox", { name: "Select moved.txt" }).waitFor();

      // A selection of folders downloads as one ZIP (POST /file/archive, then its URL).
      await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: "My files" }).click();
      await expectPath(page, /^\/files$/);
      await root.getByRole("checkbox", { name: "Select Move source" }).click();
      await root.getByRole("checkbox", { name: "Select Move target" }).click();
      const [zip] = await Promise.all([
        page.waitForEvent("download"),
        page.getByRole("toolbar", { name: "Selected items" }).getByRole("button", { name: "Download as ZIP" }).click(),
      ]);
      const head = readFileSync(await zip.path()).subarray(0, 2).toString("latin1");
      if (head !== "PK") throw new Error(`the archive does not start like a ZIP (${JSON.stringify(head)})`);
    },
  ],
];
