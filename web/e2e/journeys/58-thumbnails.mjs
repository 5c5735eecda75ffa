// Thumbnails: a user uploads a PNG into a folder, switches the file browser to the grid view,
// and sees the image's thumbnail (made by the server in the background) in place of the icon.
import { deflateSync } from "node:zlib";
import { base, shot, expectPath, pick, watch, TIMEOUT } from "../lib.mjs";

function crc32(bytes) {
  let crc = ~0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return ~crc >>> 0;
}

/** A `width` x `height` RGB PNG with a diagonal gradient. */
function gradientPng(width, height) {
  const chunk = (kind, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(kind, 4, "latin1");
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = y * (width * 3 + 1) + 1 + x * 3;
      rows.set([(x * 255) / width, (y * 255) / height, 160], at);
    }
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk("IHDR", header), chunk("IDAT", deflateSync(rows)), chunk("IEND", Buffer.alloc(0))]);
}

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
      const picture = { name: "sunset.png", mimeType: "image/png", buffer: gradientPng(640, 400) };
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
