// Accessibility: axe-core scans the main pages (sign-in, files, my shares, settings, a share's
// password prompt, its open view and report dialog, a file's versions dialog, the image viewer,
// highlighted code, administration) and fails on any "serious" or "critical"
// violation. axe is injected as a script, so this journey's context bypasses the page's CSP
// (only here: the other journeys keep it and report any violation of it).
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { base, email, password, expectPath, png, TIMEOUT, accountButton } from "../lib.mjs";

const require = createRequire(import.meta.url);
const axeSource = () => readFile(require.resolve("axe-core/axe.min.js"), "utf8");

async function scan(page, name, source, found) {
  await page.waitForLoadState("networkidle");
  if (!(await page.evaluate(() => "axe" in window))) await page.addScriptTag({ content: source });
  const violations = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
  });
  for (const v of violations) {
    const line = `${name}: [${v.impact}] ${v.id} (${v.help}) at ${v.nodes.join(", ")}`;
    if (v.impact === "serious" || v.impact === "critical") found.push(line);
    else minor.push(line);
  }
  scanned.push(name);
}
const minor = [];
const scanned = [];

async function signIn(page, who) {
  await page.goto(base + "/login");
  await page.getByLabel("E-mail").fill(who.email);
  await page.getByLabel("Password", { exact: true }).fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expectPath(page, /^\/files$/);
}

export const journeys = [
  [
    "no serious or critical axe-core violations on the main pages",
    async (_page, run) => {
      const source = await axeSource();
      const found = [];
      const context = await run.browser.newContext({ locale: "en-US", bypassCSP: true, viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        page.setDefaultTimeout(TIMEOUT);
        await page.goto(base + "/login");
        await page.getByRole("button", { name: "Sign in" }).waitFor();
        await scan(page, "sign-in", source, found);
        if (run.share) {
          await page.goto(run.share.link);
          await page.getByRole("heading", { name: "This share is protected" }).waitFor();
          await scan(page, "share password prompt", source, found);
          await page.getByLabel("Password").fill(run.share.password);
          await page.getByRole("button", { name: "Open" }).click();
          await page.getByRole("heading", { name: run.share.name }).waitFor();
          await scan(page, "share page", source, found);
          await page.getByRole("button", { name: "Report" }).click();
          await page.getByRole("dialog", { name: "Report this share" }).waitFor();
          await scan(page, "share report dialog", source, found);
          await page.getByRole("button", { name: "Cancel" }).click();
        }
        const admin = run.admin.email ? run.admin : { email, password };
        await signIn(page, admin);
        await accountButton(page).waitFor();
        await scan(page, "files", source, found);
        // A file with one version, its viewer page and its versions dialog.
        const fileId = await page.evaluate(async () => {
          const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
          const headers = { Authorization: `Bearer ${access_token}`, "Content-Type": "application/octet-stream" };
          const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
          const q = new URLSearchParams({ parent_id: root.folder.id, name: `axe-${Date.now().toString(36)}.txt` });
          const made = await (await fetch(`/api/v1/file/content?${q}`, { method: "POST", headers, body: "one" })).json();
          await fetch(`/api/v1/file/content?id=${made.id}`, { method: "PATCH", headers, body: "two" });
          return made.id;
        });
        await page.goto(`${base}/open/${fileId}`);
        await page.getByRole("button", { name: "Versions", exact: true }).click();
        await page.getByRole("dialog", { name: /^Versions of / }).locator("tbody tr").first().waitFor();
        await scan(page, "versions dialog", source, found);
        // The image viewer and highlighted code.
        const picture = png(64, 48, (x) => [x * 4, 90, 160]).toString("base64");
        const viewed = await page.evaluate(async (picture) => {
          const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
          const headers = { Authorization: `Bearer ${access_token}`, "Content-Type": "application/octet-stream" };
          const root = await (await fetch("/api/v1/directory?limit=1", { headers })).json();
          const ids = [];
          for (const [name, body] of [
            [`axe-${Date.now().toString(36)}.png`, Uint8Array.from(atob(picture), (c) => c.charCodeAt(0))],
            [`axe-${Date.now().toString(36)}.py`, "def hello(name):\n    # Greets.\n    return f'hello {name}'\n"],
          ]) {
            const q = new URLSearchParams({ parent_id: root.folder.id, name });
            ids.push((await (await fetch(`/api/v1/file/content?${q}`, { method: "POST", headers, body })).json()).id);
          }
          return ids;
        }, picture);
        await page.goto(`${base}/open/${viewed[0]}`);
        await page.getByRole("dialog", { name: /^Image viewer: / }).getByRole("img").waitFor();
        await scan(page, "image viewer", source, found);
        await page.goto(`${base}/open/${viewed[1]}`);
        await page.locator("pre.hljs .hljs-keyword").first().waitFor();
        await scan(page, "code viewer", source, found);
        for (const [path, ready] of [
          ["/shares", () => page.getByRole("heading", { name: "My shares" })],
          ["/settings", () => page.getByRole("button", { name: "Save theme" })],
          ["/admin", () => page.getByRole("figure", { name: /Registrations per day/ })],
          ["/admin/users", () => page.getByLabel("Find users")],
          ["/admin/groups", () => page.getByRole("button", { name: "New group" })],
          ["/admin/policies", () => page.getByRole("button", { name: "New local policy" })],
          ["/admin/reports", () => page.getByLabel("State")],
          ["/admin/themes", () => page.getByRole("button", { name: "New theme" })],
          ["/admin/viewers", () => page.getByRole("heading", { name: "Built-in viewers" })],
          ["/admin/activity", () => page.getByRole("button", { name: "Download CSV" })],
          ["/admin/settings", () => page.getByRole("link", { name: "OAuth providers" }).first()],
          ["/admin/settings/site", () => page.getByLabel("Site name")],
          ["/admin/settings/sign-in", () => page.getByRole("group", { name: "Sign-in methods" })],
          ["/admin/settings/mail", () => page.getByLabel("SMTP host")],
        ]) {
          await page.goto(base + path);
          await ready().waitFor();
          await scan(page, path, source, found);
        }
        // A phone: the administration's switcher stands in for its side list.
        await page.setViewportSize({ width: 390, height: 844 });
        await page.goto(base + "/admin/settings/oauth");
        await page.getByLabel("Go to").waitFor();
        await scan(page, "/admin/settings/oauth on a phone", source, found);
      } finally {
        await context.close();
      }
      console.log(`  axe-core scanned ${scanned.length} pages: ${scanned.join(", ")}`);
      for (const m of minor) console.log(`  (minor) ${m}`);
      if (found.length) throw new Error(`${found.length} serious or critical violation(s):\n  ${found.join("\n  ")}`);
    },
  ],
];
