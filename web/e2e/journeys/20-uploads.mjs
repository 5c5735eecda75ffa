// Uploads: a folder with a 50 MiB file, picked through the folder input; progress rises, pause
// mid-way, reload, pick the same folder again, the upload resumes from the chunks the server
// has (not from 0), completes, and the file downloaded through the app has the source's bytes.
import { createHash } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { base, shot, expectPath, pick, expected, rowAction } from "../lib.mjs";

const SIZE = 50 * 1024 * 1024;
const CHUNK_PATH = /\/api\/v1\/file\/upload\/[0-9a-f-]{36}\/\d+$/;

/** Deterministic bytes (xorshift32), so a failure can be reproduced byte for byte. */
function bytes(n, seed = 0x9e3779b9) {
  const buf = Buffer.allocUnsafe(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i += 4) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    buf.writeUInt32LE(x, i);
  }
  return buf;
}
const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const journeys = [
  [
    "upload a folder with a 50 MiB file, pause, reload, resume, download the same bytes",
    async (page) => {
      const tmp = mkdtempSync(path.join(tmpdir(), "nubo-journey-"));
      try {
        const dir = path.join(tmp, "journey-upload");
        mkdirSync(path.join(dir, "data"), { recursive: true });
        const source = bytes(SIZE);
        writeFileSync(path.join(dir, "data", "big.bin"), source);
        const want = sha256(source);

        await page.goto(base + "/files");
        const dialog = page.getByRole("dialog");
        await page.getByRole("button", { name: "New folder" }).click();
        await dialog.getByRole("textbox").fill("Upload journey");
        await dialog.getByRole("button", { name: "New folder" }).click();
        await page.getByRole("link", { name: "Upload journey" }).click();
        await expectPath(page, /^\/files\/Upload%20journey$/);
        await page.getByText("0 items").waitFor();

        // Chunks take a while on a local master otherwise too fast to pause: hold each answer.
        const acked = new Set();
        const sent = [];
        let delay = 1200;
        await page.route(CHUNK_PATH, async (route) => {
          sent.push(Number(route.request().url().split("/").pop()));
          await sleep(delay);
          // A paused (aborted) chunk or one from before the reload has no request left to continue.
          await route.continue().catch(() => undefined);
        });
        const onResponse = (r) => {
          if (CHUNK_PATH.test(new URL(r.url()).pathname) && r.status() === 200) {
            acked.add(Number(r.url().split("/").pop()));
          }
        };
        page.on("response", onResponse);

        await pick(page, "#upload-folder-input", dir);
        const queue = page.getByRole("region", { name: "Uploads" });
        const bar = queue.getByRole("progressbar", { name: "Upload progress of big.bin" });
        const value = async () => Number(await bar.getAttribute("value"));
        // Progress rises: sample it until some chunks are acknowledged.
        const seen = [];
        for (let i = 0; i < 200 && acked.size < 3; i++) {
          seen.push(await value());
          await sleep(50);
        }
        if (acked.size < 3) throw new Error(`only ${acked.size} chunks acknowledged`);
        const rising = seen.filter((v, i) => i > 0 && v > seen[i - 1]).length;
        if (!rising || Math.max(...seen) <= 0) throw new Error(`progress did not rise: ${seen.slice(0, 20).join(",")}`);
        await queue.getByText(/\/s/).first().waitFor(); // speed shown while uploading
        await queue.getByRole("button", { name: "Pause big.bin" }).click();
        await queue.getByText(/^Paused at/).waitFor();
        const pausedAt = await value();
        if (!(pausedAt > 0 && pausedAt < SIZE)) throw new Error(`paused at ${pausedAt}`);
        const before = new Set(acked);
        await shot(page, "upload-paused");

        // Reload: the interrupted upload is listed; picking the same folder resumes it.
        await page.reload();
        await queue.getByText(/^Interrupted at/).waitFor();
        delay = 300;
        sent.length = 0;
        await pick(page, "#upload-folder-input", dir);
        await queue.getByRole("button", { name: "Pause big.bin" }).waitFor();
        const resumedAt = await value();
        if (!(resumedAt > 0)) throw new Error(`resumed from ${resumedAt}, not from the stored chunks`);
        await queue.getByText("Done").waitFor({ timeout: 60_000 });
        page.off("response", onResponse);
        await page.unroute(CHUNK_PATH);
        const resent = sent.filter((i) => before.has(i));
        if (resent.length) throw new Error(`chunks ${resent.join(",")} were sent again after resuming`);
        console.log(`  paused at ${(pausedAt / 2 ** 20).toFixed(1)} MiB (${before.size} chunks), resumed from ${(resumedAt / 2 ** 20).toFixed(1)} MiB, ${sent.length} chunks sent after the reload`);

        // The folder structure was created and the file downloads with the same bytes.
        await page.getByRole("link", { name: "journey-upload" }).click();
        await page.getByRole("link", { name: "data" }).click();
        await expectPath(page, /^\/files\/Upload%20journey\/journey-upload\/data$/);
        const list = page.getByRole("list", { name: "Contents of data" });
        const [download] = await Promise.all([
          page.waitForEvent("download"),
          rowAction(list, "big.bin", "Download", "last"),
        ]);
        const got = sha256(readFileSync(await download.path()));
        if (got !== want) throw new Error(`downloaded SHA-256 ${got} differs from the source ${want}`);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    },
  ],
  [
    "cancel an upload (its server session goes), and a name clash says so and can keep both",
    async (page) => {
      await page.goto(base + "/files/Upload%20journey");
      await page.getByText("1 item", { exact: true }).waitFor();
      const queue = page.getByRole("region", { name: "Uploads" });
      // Hold the chunks so the upload is still running when it is cancelled.
      let session = null;
      await page.route(CHUNK_PATH, async (route) => {
        session ??= route.request().url().split("/").slice(-2)[0];
        await sleep(2000);
        await route.continue().catch(() => undefined);
      });
      await pick(page, "#upload-input", { name: "cancel-me.bin", mimeType: "application/octet-stream", buffer: bytes(20 * 1024 * 1024, 7) });
      for (let i = 0; i < 100 && !session; i++) await sleep(50);
      if (!session) throw new Error("no chunk was sent");
      await queue.getByRole("button", { name: "Cancel cancel-me.bin" }).click();
      await queue.getByText("cancel-me.bin").waitFor({ state: "detached" });
      await page.unroute(CHUNK_PATH);
      // Ask the API from here, not from the page (a 404 there would be logged as a console error).
      const token = await page.evaluate(() => JSON.parse(localStorage.getItem("nubo.session")).access_token);
      let status = 0;
      for (let i = 0; i < 20 && status !== 404; i++) {
        if (i) await sleep(100);
        status = (await fetch(`${base}/api/v1/file/upload/${session}`, { headers: { Authorization: `Bearer ${token}` } })).status;
      }
      if (status !== 404) throw new Error(`the cancelled upload's session is ${status}`);

      const file = { name: "clash.txt", mimeType: "text/plain", buffer: Buffer.from("one\n") };
      await pick(page, "#upload-input", file);
      await queue.getByText("Done").first().waitFor();
      await page.getByRole("list", { name: "Contents of Upload journey" }).getByRole("checkbox", { name: "Select clash.txt" }).waitFor();
      await pick(page, "#upload-input", file);
      // A taken name is a conflict, not a failure: said so, with the choices it leaves.
      const clash = queue.getByRole("listitem").filter({ has: page.getByRole("alert").filter({ hasText: "A file with this name exists in this folder." }) });
      await clash.waitFor();
      if (await clash.getByText(/Failed/).count()) throw new Error("the name conflict is labelled as a failure");
      await clash.getByRole("button", { name: "Replace the existing clash.txt" }).waitFor();
      // The browser logs the refused request (409) as a console error: expected here, not a problem.
      expected("status of 409");
      // Keep both: it is sent again under the first free name, beside the first one.
      await clash.getByRole("button", { name: "Keep both: upload clash.txt under a new name" }).click();
      await page.getByRole("list", { name: "Contents of Upload journey" }).getByRole("checkbox", { name: "Select clash (1).txt" }).waitFor();
      await queue.getByRole("listitem").filter({ hasText: "clash (1).txt" }).getByText("Done").waitFor();
    },
  ],
];
