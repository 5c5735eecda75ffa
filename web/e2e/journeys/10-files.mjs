// The file browser: folders, uploads, rename, delete.
import { shot, expectPath, TIMEOUT } from "../lib.mjs";

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
      await page.locator("#upload-input").setInputFiles({ name: "hello.txt", mimeType: "text/plain", buffer: content });
      const queue = page.getByRole("region", { name: "Uploads" });
      await queue.getByText("Done").waitFor({ timeout: TIMEOUT });
      const list = page.getByRole("list", { name: "Contents of Journey folder" });
      await list.getByRole("button", { name: "Download hello.txt" }).first().waitFor();
      await page.getByText("1 item", { exact: true }).waitFor();
      await shot(page, "file-browser");
      await list.getByRole("button", { name: "Rename hello.txt" }).click();
      await dialog.getByRole("textbox").fill("renamed.txt");
      await dialog.getByRole("button", { name: "Rename" }).click();
      await list.getByRole("button", { name: "Rename renamed.txt" }).waitFor();
      if (await list.getByRole("button", { name: "Rename hello.txt" }).count()) throw new Error("old name still listed");
      await list.getByRole("button", { name: "Delete renamed.txt" }).click();
      await dialog.getByRole("button", { name: "Delete" }).click();
      await page.getByText("This folder is empty").waitFor();
      await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: "My files" }).click();
      await expectPath(page, /^\/files$/);
      await page.getByRole("link", { name: "Journey folder" }).waitFor();
    },
  ],
];
