// Viewers: a text file opened from the file browser is edited and saved back; Markdown is
// rendered and can be shown as text; an image is shown. An administrator adds a WOPI application
// (a scripted WOPI client this journey serves: its discovery, and an editor page that reads the
// file through the WOPI host and saves a new version), and the user opens a document in it; the
// administrator turns the Markdown viewer off and users no longer get it.
import http from "node:http";
import { base, shot, expectPath, signIn, watch, adminApi, TIMEOUT } from "../lib.mjs";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/** Stores files through the API as the page's user; answers their ids by name. */
async function store(page, files) {
  return page.evaluate(async (files) => {
    const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
    const headers = { Authorization: `Bearer ${access_token}` };
    const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
    const ids = {};
    for (const [name, text, base64] of files) {
      const body = base64 ? Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)) : text;
      const q = new URLSearchParams({ parent_id: root.folder.id, name });
      const res = await fetch(`/api/v1/file/content?${q}`, {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/octet-stream" },
        body,
      });
      ids[name] = (await res.json()).id;
    }
    return ids;
  }, files);
}

/** The file's content as text, read through the API as the page's user. */
async function content(page, id) {
  return page.evaluate(async (id) => {
    const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
    const headers = { Authorization: `Bearer ${access_token}` };
    const token = await (await fetch(`/api/v1/file/download/${id}`, { method: "POST", headers })).json();
    return (await fetch(token.url)).text();
  }, id);
}

/**
 * A WOPI client: `/hosting/discovery` lists `.docx` (view and edit) on its `/edit` page and
 * publishes no proof key; the page, posted the access token by the host page, reads the file
 * (CheckFileInfo, GetFile), locks it, saves a new version (PutFile), unlocks, and shows what it
 * read and how the save went.
 */
function startWopiClient() {
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://client");
    const origin = `http://127.0.0.1:${server.address().port}`;
    if (url.pathname === "/hosting/discovery") {
      res.writeHead(200, { "content-type": "text/xml" });
      res.end(`<?xml version="1.0" encoding="utf-8"?><wopi-discovery><net-zone name="external-http">
        <app name="Word"><action ext="docx" name="view" urlsrc="${origin}/edit?"/>
        <action ext="docx" name="edit" default="true" urlsrc="${origin}/edit?"/></app></net-zone></wopi-discovery>`);
      return;
    }
    if (url.pathname !== "/edit" || req.method !== "POST") {
      res.writeHead(404).end();
      return;
    }
    let form = "";
    for await (const chunk of req) form += chunk;
    const token = new URLSearchParams(form).get("access_token");
    const src = url.searchParams.get("WOPISrc");
    const at = (suffix) => `${src}${suffix}?access_token=${encodeURIComponent(token)}`;
    const wopi = (suffix, override, headers = {}, body) =>
      fetch(at(suffix), { method: "POST", headers: { "X-WOPI-Override": override, ...headers }, body });
    const info = await (await fetch(at(""))).json();
    const original = await (await fetch(at("/contents"))).text();
    let saved = "read only";
    if (info.UserCanWrite) {
      const lock = await wopi("", "LOCK", { "X-WOPI-Lock": "journey-lock" });
      const put = await wopi("/contents", "PUT", { "X-WOPI-Lock": "journey-lock" }, "edited in Fake Office");
      const unlock = await wopi("", "UNLOCK", { "X-WOPI-Lock": "journey-lock" });
      saved = `lock ${lock.status}, save ${put.status}, unlock ${unlock.status}`;
    }
    const escape = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><title>Fake Office</title><h1>${escape(info.BaseFileName)}</h1>
      <p>Opened by ${escape(info.UserFriendlyName)}; can write: ${escape(info.UserCanWrite)}</p>
      <p>Read: ${escape(original)}</p><p>Saved: ${escape(saved)}</p>`);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

export const journeys = [
  [
    "a text file is edited and saved, Markdown is rendered and an image is shown",
    async (page) => {
      const tag = Date.now().toString(36);
      const names = { text: `notes-${tag}.txt`, md: `readme-${tag}.md`, png: `dot-${tag}.png` };
      const ids = await store(page, [
        [names.text, "first line"],
        [names.md, "# Release notes\n\nSome *emphasis* and <script>alert(1)</script>"],
        [names.png, null, PNG],
      ]);
      await page.goto(base + "/files");
      await page.getByRole("link", { name: `Open ${names.text}` }).click();
      await expectPath(page, new RegExp(`^/open/${ids[names.text]}$`));
      await page.getByRole("heading", { name: names.text }).waitFor();
      const editor = page.getByLabel(`Content of ${names.text}`);
      await editor.waitFor();
      if ((await editor.inputValue()) !== "first line") throw new Error("the editor does not show the file");
      await editor.fill("first line\nsecond line");
      await page.getByRole("status").filter({ hasText: "Unsaved changes" }).waitFor();
      await shot(page, "viewer-text");
      await page.getByRole("button", { name: "Save", exact: true }).click();
      await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
      const stored = await content(page, ids[names.text]);
      if (stored !== "first line\nsecond line") throw new Error(`saved content is ${JSON.stringify(stored)}`);
      // Unsaved changes are not thrown away: leaving asks, and "stay" keeps them.
      await editor.fill("first line\nsecond line\nthird line");
      const asked = [];
      const answer = (choice) => (dialog) => {
        asked.push(dialog.message());
        return choice ? dialog.accept() : dialog.dismiss();
      };
      let handler = answer(false);
      page.once("dialog", handler);
      await page.getByRole("link", { name: "← Back to the folder" }).click();
      if (!asked.length) throw new Error("leaving with unsaved changes did not ask");
      if (!new URL(page.url()).pathname.startsWith("/open/")) throw new Error("the editor was left although the person stayed");
      if ((await editor.inputValue()) !== "first line\nsecond line\nthird line") throw new Error("staying lost the edits");
      handler = answer(true);
      page.once("dialog", handler);
      await page.getByRole("link", { name: "← Back to the folder" }).click();
      await expectPath(page, /^\/files$/);
      if (asked.length !== 2 || !/unsaved changes/.test(asked[0])) throw new Error(`asked ${JSON.stringify(asked)}`);

      // Markdown: rendered (and sanitised), or shown as text when asked.
      await page.goto(`${base}/open/${ids[names.md]}`);
      await page.getByRole("heading", { name: "Release notes" }).waitFor();
      if (await page.locator("article script").count()) throw new Error("a script survived sanitising");
      const openWith = page.getByRole("group", { name: "Open with" });
      await openWith.getByRole("button", { name: "Text" }).click();
      await page.getByLabel(`Content of ${names.md}`).waitFor();
      if (!page.url().includes("with=text")) throw new Error(`the choice is not in the URL: ${page.url()}`);

      // An image, from a single-use download URL, in the lightbox (68-lightbox follows it).
      await page.goto(`${base}/open/${ids[names.png]}`);
      const image = page.getByRole("img", { name: names.png });
      await image.waitFor();
      await page.waitForFunction((name) => document.querySelector(`img[alt="${name}"]`)?.naturalWidth === 1, names.png);
      await page.getByRole("link", { name: "Close the image viewer" }).click();
      await expectPath(page, /^\/files$/);
    },
  ],
  [
    "an administrator adds a WOPI application and a user edits a document in it",
    async (page, run) => {
      const client = await startWopiClient();
      const discovery = `http://127.0.0.1:${client.address().port}/hosting/discovery`;
      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 900 } });
      let appId = null;
      try {
        const admin = await context.newPage();
        admin.setDefaultTimeout(TIMEOUT);
        watch(admin);
        await signIn(admin, run.admin);
        await admin.goto(base + "/admin/viewers");
        await admin.getByRole("heading", { name: "Built-in viewers" }).waitFor();
        await admin.getByLabel("Name", { exact: true }).fill("Fake Office");
        await admin.getByLabel("Discovery URL").fill(discovery);
        await admin.getByLabel(/Internal: the discovery/).check();
        await admin.getByLabel(/Accept requests without proof/).check();
        await admin.getByRole("button", { name: "Add", exact: true }).click();
        const row = admin.getByRole("row").filter({ hasText: "Fake Office" });
        await row.getByRole("cell", { name: "1 (1 editable)" }).waitFor();
        await row.getByRole("cell", { name: "None: accepted unsigned" }).waitFor();
        await shot(admin, "admin-viewers");
        appId = (await adminApi(run, "GET", "/admin/wopi")).find((a) => a.name === "Fake Office").id;

        // The user opens a .docx: the only viewer is the application, in a frame.
        const name = `report-${Date.now().toString(36)}.docx`;
        const ids = await store(page, [[name, "original words"]]);
        await page.goto(base + "/files");
        await page.getByRole("link", { name: `Open ${name}` }).click();
        const frame = page.frameLocator(`iframe[title="${name} in Fake Office"]`);
        await frame.getByRole("heading", { name }).waitFor();
        await frame.getByText("can write: true").waitFor();
        await frame.getByText("Read: original words").waitFor();
        await frame.getByText("Saved: lock 200, save 200, unlock 200").waitFor();
        await shot(page, "viewer-wopi");
        const stored = await content(page, ids[name]);
        if (stored !== "edited in Fake Office") throw new Error(`the WOPI save left ${JSON.stringify(stored)}`);

        // The administrator turns Markdown off: users get the text viewer only.
        await admin.getByLabel("Markdown on").uncheck();
        await admin.getByRole("button", { name: "Save", exact: true }).first().click();
        await admin.getByRole("status").filter({ hasText: "Saved." }).waitFor();
        const plain = `plain-${Date.now().toString(36)}.md`;
        const md = await store(page, [[plain, "# Not rendered"]]);
        await page.goto(`${base}/open/${md[plain]}`);
        // Markdown as text is code: highlighted to read, Edit for the editor.
        await page.getByLabel(`Content of ${plain}`).locator(".hljs-section").waitFor();
        await page.getByRole("button", { name: "Edit", exact: true }).click();
        const editor = page.getByRole("textbox", { name: `Content of ${plain}` });
        await editor.waitFor();
        if ((await editor.inputValue()) !== "# Not rendered") throw new Error("the text viewer does not show the file");
        if (await page.getByRole("group", { name: "Open with" }).count()) throw new Error("Markdown is still offered");
      } finally {
        const catalog = await adminApi(run, "GET", "/admin/settings/catalog").catch(() => []);
        const viewers = catalog.find((e) => e.name === "viewers")?.default;
        if (viewers) await adminApi(run, "PATCH", "/admin/settings", { viewers }).catch(() => undefined);
        if (appId) await adminApi(run, "DELETE", `/admin/wopi/${appId}`).catch(() => undefined);
        await context.close();
        client.close();
      }
    },
  ],
];
