// Thumbnails: a user uploads a PNG into a folder, switches the file browser to the grid view,
// and sees the image's thumbnail (made by the server in the background) in place of the icon.
import { base, shot, expectPath, pick, watch, png, TIMEOUT } from "../lib.mjs";

export const journeys = [
  [
    "an uploaded picture shows its thumbnail in the grid view",
    async (page) => {
      watch(page);
      await page.goto(base + "/files");
      await expectPath(page, /^\/files$/);
      await page.getByRole("button", { name: "New folder" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByRole("textbox").fill("Pictures");
      await dialog.getByRole("button", { name: "New folder" }).click();
      await page.getByRole("link", { name: "Pictures" }).click();
      await expectPath(page, /^\/files\/Pictures$/);
      await page.getByText("This folder is empty").waitFor();
      const picture = { name: "sunset.png", mimeType: "image/png", buffer: png(640, 400, (x, y) => [(x * 255) / 640, (y * 255) / 400, 160]) };
      await pick(page, "#upload-input", picture);
      await page.getByRole("region", { name: "Uploads" }).getByText("Done").waitFor({ timeout: TIMEOUT });
      await page.getByRole("button", { name: "Grid view" }).click();
      const list = page.getByRole("list", { name: "Contents of Pictures" });
      const tile = list.getByRole("listitem").filter({ hasText: "sunset.png" });
      const thumbnail = tile.getByTestId("thumbnail");
      await thumbnail.waitFor({ timeout: TIMEOUT });
      await page.waitForFunction(
        (img) => img.complete && img.naturalWidth > 0,
        await thumbnail.elementHandle(),
        { timeout: TIMEOUT },
      );
      const size = await thumbnail.evaluate((img) => [img.naturalWidth, img.naturalHeight, img.src]);
      if (size[0] !== 256 || size[1] !== 160) throw new Error(`thumbnail is ${size[0]}x${size[1]}, expected 256x160`);
      if (!size[2].startsWith("blob:")) throw new Error(`thumbnail is not a blob: URL but ${size[2]}`);
      await shot(page, "thumbnails-grid");
      // Later journeys expect the list view.
      await page.getByRole("button", { name: "List view" }).click();
    },
  ],
];
