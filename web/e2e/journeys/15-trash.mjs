// The trash: deleting for good asks first (Cancel keeps the entry), then the entry is gone.
import { base, expectPath, rowAction } from "../lib.mjs";

export const journeys = [
  [
    "delete an entry for good from the trash, after a confirmation",
    async (page) => {
      await page.goto(base + "/files");
      const dialog = page.getByRole("dialog");
      await page.getByRole("button", { name: "New folder" }).click();
      await dialog.getByRole("textbox").fill("Purge me");
      await dialog.getByRole("button", { name: "New folder" }).click();
      const root = page.getByRole("list", { name: "Contents of My files" });
      await rowAction(root, "Purge me", "Delete");
      await dialog.getByRole("button", { name: "Delete" }).click();
      await root.getByRole("button", { name: "Actions for Purge me" }).waitFor({ state: "detached" });

      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Trash" }).click();
      await expectPath(page, /^\/trash$/);
      const trash = page.getByRole("list", { name: "Items in the trash" });
      const purge = trash.getByRole("button", { name: "Delete Purge me for good" });
      await purge.click();
      await dialog.getByText("Delete “Purge me” for good? This cannot be undone.").waitFor();
      await dialog.getByRole("button", { name: "Cancel" }).click();
      await purge.waitFor();
      await purge.click();
      await dialog.getByRole("button", { name: "Delete for good" }).click();
      await purge.waitFor({ state: "detached" });
      await page.reload();
      await trash.getByRole("button", { name: /^Restore / }).first().waitFor();
      if (await purge.count()) throw new Error("the purged folder is back after a reload");
    },
  ],
];
