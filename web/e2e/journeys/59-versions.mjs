// Versions: a text file whose content was replaced twice lists two versions on the viewer page;
// the oldest downloads with its bytes, is restored (the file holds it again, and the content it
// replaced takes its place in the list) and a version is deleted; from the file browser's
// properties panel, deleting a file's only version leaves the empty list and frees its bytes in
// the storage bar. An upload of a name already taken offers Replace, and replacing keeps the old
// content as a version.
import { readFileSync } from "node:fs";
import { base, shot, expectPath, pick, problems } from "../lib.mjs";

/** Calls the API as the page's user (from here, so an expected refusal is no console error). */
async function call(page, method, path, body) {
  const token = await page.evaluate(() => JSON.parse(localStorage.getItem("nubo.session")).access_token);
  const raw = typeof body === "string";
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": raw ? "application/octet-stream" : "application/json" }),
    },
    body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : res.json();
}

/** A new text file in the root folder; answers its id. */
async function store(page, name, text) {
  const root = await call(page, "GET", "/directory?limit=1");
  const q = new URLSearchParams({ parent_id: root.folder.id, name });
  return (await call(page, "POST", `/file/content?${q}`, text)).id;
}

/** The bytes behind a single-use download URL, as text. */
async function fetchText(url) {
  const res = await fetch(new URL(url, base));
  if (!res.ok) throw new Error(`download: ${res.status}`);
  return res.text();
}

const content = async (page, id) => fetchText((await call(page, "POST", `/file/download/${id}`)).url);
const versions = (page, id) => call(page, "GET", `/object/${id}/versions`);

export const journeys = [
  [
    "a file's versions are listed, downloaded, restored and deleted",
    async (page) => {
      const tag = Date.now().toString(36);
      const name = `versioned-${tag}.txt`;
      const drafts = ["first draft", "second draft!", "third draft, the longest"];
      const id = await store(page, name, drafts[0]);
      await call(page, "PATCH", `/file/content?id=${id}`, drafts[1]);
      await call(page, "PATCH", `/file/content?id=${id}`, drafts[2]);
      const before = await versions(page, id);
      if (before.length !== 2) throw new Error(`the API lists ${before.length} versions, not 2`);

      await page.goto(`${base}/open/${id}`);
      const editor = page.getByLabel(`Content of ${name}`);
      await editor.waitFor();
      await page.waitForFunction((text) => document.getElementById("viewer-text")?.value === text, drafts[2]);
      await page.getByRole("button", { name: "Versions", exact: true }).click();
      const dialog = page.getByRole("dialog", { name: `Versions of ${name}` });
      await dialog.waitFor();
      const rows = dialog.getByRole("table").locator("tbody tr");
      await rows.nth(1).waitFor();
      if ((await rows.count()) !== 2) throw new Error(`the dialog lists ${await rows.count()} versions, not 2`);
      // Newest first: the oldest (11 bytes) is the last row.
      const oldest = rows.last();
      await oldest.getByRole("cell", { name: "11 B", exact: true }).waitFor();
      await rows.first().getByRole("cell", { name: "13 B", exact: true }).waitFor();
      await shot(page, "versions");

      // Download the oldest: the browser saves its bytes, the same the API answers for it.
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        oldest.getByRole("button", { name: /^Download the version of / }).click(),
      ]);
      const saved = readFileSync(await download.path(), "utf8");
      const viaApi = await fetchText((await call(page, "POST", `/object/${id}/versions/${before[1].id}/download`)).url);
      if (saved !== drafts[0] || viaApi !== drafts[0]) {
        throw new Error(`the oldest version downloads as ${JSON.stringify(saved)} (API: ${JSON.stringify(viaApi)})`);
      }

      // Restore it (confirmed): the file holds it again, and the editor shows it.
      await oldest.getByRole("button", { name: /^Restore the version of / }).click();
      const confirm = page.getByRole("dialog", { name: /^Restore the version of .*becomes a version/ });
      await confirm.getByRole("button", { name: "Restore", exact: true }).click();
      await dialog.getByRole("status").filter({ hasText: "Restored the version of" }).waitFor();
      const restored = await content(page, id);
      if (restored !== drafts[0]) throw new Error(`after the restore the file holds ${JSON.stringify(restored)}`);
      // The restored version leaves the list; the content it replaced heads it.
      await rows.first().getByRole("cell", { name: "24 B", exact: true }).waitFor();
      const after = await versions(page, id);
      if (after.length !== 2 || after[0].size !== drafts[2].length || after[1].id !== before[0].id) {
        throw new Error(`after the restore the versions are ${JSON.stringify(after.map((v) => v.size))}`);
      }

      // Delete the newest version (confirmed).
      await rows.first().getByRole("button", { name: /^Delete the version of / }).click();
      await page.getByRole("dialog", { name: /^Delete the version of / }).getByRole("button", { name: "Delete", exact: true }).click();
      await dialog.getByRole("status").filter({ hasText: "Version deleted." }).waitFor();
      await page.waitForFunction(() => document.querySelectorAll("dialog.versions tbody tr").length === 1);
      const left = await versions(page, id);
      if (left.length !== 1 || left[0].id !== before[0].id) {
        throw new Error(`after the deletion the versions are ${JSON.stringify(left.map((v) => v.id))}`);
      }
      if (await dialog.getByRole("alert").count()) throw new Error(`an error shows: ${await dialog.getByRole("alert").innerText()}`);
      await dialog.getByRole("button", { name: "Close versions" }).click();
      await page.waitForFunction((text) => document.getElementById("viewer-text")?.value === text, drafts[0]);

      // From the file browser's properties panel: deleting a file's only version empties the
      // list and gives its bytes back in the storage bar.
      const kept = `kept-${tag}.txt`;
      const keptId = await store(page, kept, "x".repeat(3000));
      await call(page, "PATCH", `/file/content?id=${keptId}`, "small");
      await page.goto(base + "/files");
      await expectPath(page, /^\/files$/);
      const used = () => page.evaluate(() => Number(document.querySelector('progress[aria-labelledby="storage-label"]')?.value));
      await page.getByRole("checkbox", { name: `Select ${kept}` }).click();
      const props = page.getByRole("region", { name: "Properties" });
      if (!(await props.count())) await page.getByRole("button", { name: "Show properties" }).click();
      await props.getByText(kept, { exact: true }).waitFor();
      await page.waitForFunction(() => Number(document.querySelector('progress[aria-labelledby="storage-label"]')?.value) > 0);
      const usedBefore = await used();
      await props.getByRole("button", { name: "Versions", exact: true }).click();
      const single = page.getByRole("dialog", { name: `Versions of ${kept}` });
      await single.getByRole("cell", { name: "2.9 KiB", exact: true }).waitFor();
      await single.getByRole("button", { name: /^Delete the version of / }).click();
      await page.getByRole("dialog", { name: /^Delete the version of / }).getByRole("button", { name: "Delete", exact: true }).click();
      await single.getByText("No earlier versions of this file.").waitFor();
      await page.waitForFunction(
        (want) => Number(document.querySelector('progress[aria-labelledby="storage-label"]')?.value) === want,
        usedBefore - 3000,
      );
      await page.keyboard.press("Escape");
      await single.waitFor({ state: "hidden" });
    },
  ],
  [
    "an upload of a taken name offers Replace, and replacing keeps a version",
    async (page) => {
      const name = `replace-${Date.now().toString(36)}.txt`;
      const id = await store(page, name, "content before");
      await page.goto(base + "/files");
      await page.getByRole("checkbox", { name: `Select ${name}` }).waitFor();
      const text = "content from the upload";
      await pick(page, "#upload-input", { name, mimeType: "text/plain", buffer: Buffer.from(text) });
      const queue = page.getByRole("region", { name: "Uploads" });
      await queue.getByRole("alert").filter({ hasText: "A file with this name exists in this folder." }).waitFor();
      await queue.getByRole("button", { name: `Replace the existing ${name}` }).click();
      await queue.getByText("Done").first().waitFor();
      const now = await content(page, id);
      if (now !== text) throw new Error(`after the replacing upload the file holds ${JSON.stringify(now)}`);
      const kept = await versions(page, id);
      if (kept.length !== 1 || kept[0].size !== "content before".length) {
        throw new Error(`the replacing upload kept ${JSON.stringify(kept)}`);
      }
      // The browser logs the refused session (409) as a console error, once per attempt: expected.
      for (let at = problems.findIndex((p) => p.includes("status of 409")); at >= 0; at = problems.findIndex((p) => p.includes("status of 409"))) {
        problems.splice(at, 1);
      }
    },
  ],
];
