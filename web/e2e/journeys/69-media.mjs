// Media and share previews: a video made by ffmpeg plays from its media URL and, seeked to its
// middle, keeps playing (its time moves on); the folder holding it is shared, marked as shared
// in the list, and sharing it again shows the existing link instead of making another; the
// share's visitor sees the pictures' thumbnails in a gallery, an image's preview with a next
// one, and the video in the player; on a phone the share page fits the screen. Last, an
// unfinished upload's reservation is named under the storage bar and cancelled from there.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { base, expectPath, fillFolder, png, rowAction, shot, TIMEOUT } from "../lib.mjs";

/** An 8-second 320×240 WebM (VP8, with cues, so a player can seek), drawn by ffmpeg. */
function webm() {
  const dir = mkdtempSync(path.join(tmpdir(), "nubo-e2e-"));
  try {
    const out = path.join(dir, "clip.webm");
    execFileSync("ffmpeg", [
      "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=8:size=320x240:rate=25",
      "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "300k", "-f", "webm", out,
    ]);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Waits until every image in `scope` matching `selector` has decoded; answers their sizes. */
async function decoded(scope, locator, count) {
  await locator.nth(count - 1).waitFor({ timeout: TIMEOUT });
  const handles = await locator.elementHandles();
  for (const img of handles) {
    await scope.waitForFunction((img) => img.complete && img.naturalWidth > 0, img, { timeout: TIMEOUT });
  }
  return Promise.all(handles.map((img) => img.evaluate((i) => [i.naturalWidth, i.naturalHeight])));
}

export const journeys = [
  [
    "a video seeked to its middle keeps playing, and a shared folder shows its pictures and video to visitors",
    async (page, run) => {
      const folder = `Media ${Date.now()}`;
      const beach = png(640, 400, (x, y) => [(x * 255) / 640, (y * 255) / 400, 90]);
      const hills = png(300, 500, (x, y) => [40, (x * 255) / 300, (y * 255) / 500]);
      const ids = await fillFolder(page, folder, [["beach.png", beach], ["hills.png", hills], ["clip.webm", webm()]]);

      // The owner's player: every ranged read goes through one reusable media URL.
      const ranged = [];
      page.on("response", (r) => {
        if (r.url().includes("/api/v1/file/media/")) ranged.push(r.status());
      });
      await page.goto(`${base}/open/${ids["clip.webm"]}`);
      const video = page.locator("video");
      await video.waitFor();
      await video.evaluate(async (v) => {
        v.muted = true;
        await new Promise((ok, fail) => {
          if (v.readyState >= 1) return ok();
          v.addEventListener("loadedmetadata", ok, { once: true });
          v.addEventListener("error", () => fail(new Error(`the video failed: ${v.error?.code}`)), { once: true });
        });
        await v.play();
      });
      const after = await video.evaluate(async (v) => {
        const middle = v.duration / 2;
        const seeked = new Promise((ok) => v.addEventListener("seeked", ok, { once: true }));
        v.currentTime = middle;
        await seeked;
        const from = v.currentTime;
        await new Promise((ok) => setTimeout(ok, 1500));
        return { middle, from, now: v.currentTime, paused: v.paused, error: v.error?.code ?? null };
      });
      if (after.error !== null || after.paused) throw new Error(`after the seek the video stopped: ${JSON.stringify(after)}`);
      if (Math.abs(after.from - after.middle) > 1) throw new Error(`the seek went to ${after.from}, not ${after.middle}`);
      if (after.now < after.from + 0.5) throw new Error(`the video does not play on after the seek: ${JSON.stringify(after)}`);
      if (!ranged.includes(206) || ranged.some((s) => s >= 400)) throw new Error(`media URL answers: ${ranged.join(", ")}`);
      await shot(page, "video-seeked");

      // Share the folder; the list marks it; sharing again shows that link.
      await page.goto(`${base}/files`);
      const row = page.getByRole("listitem").filter({ has: page.getByRole("link", { name: folder, exact: true }) });
      await rowAction(row, folder, "Share");
      let dialog = page.getByRole("dialog", { name: `Share “${folder}”` });
      await dialog.getByRole("button", { name: "Create link" }).click();
      const link = await dialog.getByLabel("Link").inputValue();
      await dialog.getByRole("button", { name: "Done" }).click();
      await dialog.waitFor({ state: "hidden" });
      await row.getByTestId("shared-mark").waitFor();
      await page.reload();
      await row.getByTestId("shared-mark").waitFor();
      await rowAction(row, folder, "Share");
      dialog = page.getByRole("dialog", { name: `Share “${folder}”` });
      await dialog.getByText("This is shared already, with this link:").waitFor();
      const shown = await dialog.getByLabel("Link").inputValue();
      if (shown !== link) throw new Error(`the dialog shows ${shown}, not the link made before (${link})`);
      if (await dialog.getByRole("button", { name: "Create link" }).count()) throw new Error("the form to make another link is open");
      await dialog.getByRole("button", { name: "Done" }).click();

      // The visitor: a gallery of thumbnails, an image's preview and the next one, the video.
      const anonymous = await run.browser.newContext({ locale: "en-US", viewport: { width: 1440, height: 900 } });
      try {
        const visitor = await anonymous.newPage();
        visitor.setDefaultTimeout(TIMEOUT);
        await visitor.goto(link);
        await visitor.getByRole("heading", { name: folder }).waitFor();
        await visitor.getByRole("button", { name: "Gallery" }).click();
        const gallery = visitor.getByRole("list", { name: `Contents of ${folder}` });
        const sizes = await decoded(visitor, gallery.getByTestId("thumbnail"), 2);
        const wanted = [[256, 160], [154, 256]];
        for (const size of wanted) {
          if (!sizes.some(([w, h]) => w === size[0] && h === size[1])) throw new Error(`thumbnails are ${JSON.stringify(sizes)}`);
        }
        await shot(visitor, "share-gallery");
        await gallery.getByRole("button", { name: "Preview beach.png" }).click();
        const preview = visitor.getByRole("dialog", { name: "beach.png" });
        const [[w, h]] = await decoded(visitor, preview.getByRole("img", { name: "beach.png" }), 1);
        if (w !== 640 || h !== 400) throw new Error(`the preview is ${w}×${h}, not 640×400`);
        await preview.getByRole("button", { name: "Next" }).click();
        await visitor.getByRole("dialog", { name: "clip.webm" }).locator("video").waitFor();
        const src = await visitor.locator("dialog video").getAttribute("src");
        if (!src?.includes("/api/v1/file/media/")) throw new Error(`the visitor's player plays ${src}`);
        await visitor.keyboard.press("ArrowRight");
        await decoded(visitor, visitor.getByRole("dialog", { name: "hills.png" }).getByRole("img", { name: "hills.png" }), 1);
        await shot(visitor, "share-preview");
        await visitor.keyboard.press("Escape");
        await visitor.getByRole("dialog").waitFor({ state: "hidden" });

        // On a phone the share page and its gallery fit the screen.
        await visitor.setViewportSize({ width: 390, height: 844 });
        const { scroll, client } = await visitor.evaluate(async () => {
          // Two frames: the new width has been laid out.
          await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
          return { scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth };
        });
        if (scroll > client) throw new Error(`the share page is ${scroll} px wide on a ${client} px screen`);
        await shot(visitor, "share-gallery-phone");
      } finally {
        await anonymous.close();
      }
    },
  ],
  [
    "an unfinished upload's reservation is shown under the storage bar and cancelled there",
    async (page) => {
      await page.goto(`${base}/files`);
      await expectPath(page, /^\/files$/);
      const name = `abandoned-${Date.now()}.iso`;
      const status = await page.evaluate(async (name) => {
        const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
        const headers = { Authorization: `Bearer ${access_token}`, "Content-Type": "application/json" };
        const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
        const body = JSON.stringify({ file_name: name, file_size: 7 * 1024 * 1024, parent_id: root.folder.id });
        return (await fetch("/api/v1/file/upload", { method: "POST", headers, body })).status;
      }, name);
      if (status !== 201) throw new Error(`starting the upload answered ${status}`);
      await page.reload();
      await page.getByText(/MiB held for unfinished uploads/).waitFor();
      await page.getByRole("button", { name: "Show", exact: true }).click();
      const dialog = page.getByRole("dialog", { name: "Unfinished uploads" });
      await dialog.getByText(name).waitFor();
      await shot(page, "unfinished-uploads");
      await dialog.getByRole("button", { name: `Cancel ${name}` }).click();
      await dialog.getByText(name).waitFor({ state: "detached" });
      await dialog.getByRole("button", { name: "Done" }).click();
      const left = await page.evaluate(async (name) => {
        const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
        const r = await fetch("/api/v1/file/upload", { headers: { Authorization: `Bearer ${access_token}` } });
        return (await r.json()).items.filter((u) => u.file_name === name).length;
      }, name);
      if (left !== 0) throw new Error("the cancelled upload is still listed");
    },
  ],
];
