// Live changes: the file browser shows what another device changes in the open folder (here the
// API, called past the app), without a reload: a new folder appears, a rename follows.
import { base, expectPath } from "../lib.mjs";

/** Calls the API as the page's user without going through the app (another device, in effect). */
async function elsewhere(page, method, path, body) {
  return page.evaluate(
    async ([method, path, body]) => {
      const { access_token } = JSON.parse(localStorage.getItem("nubo.session"));
      const headers = { Authorization: `Bearer ${access_token}`, "Content-Type": "application/json" };
      const res = await fetch(`/api/v1${path}`, { method, headers, body: body && JSON.stringify(body) });
      return res.status === 204 ? null : res.json();
    },
    [method, path, body],
  );
}

export const journeys = [
  [
    "a folder made and renamed elsewhere shows up in the open folder without a reload",
    async (page) => {
      await page.goto(base + "/files");
      await expectPath(page, /^\/files$/);
      await page.getByRole("button", { name: "New folder" }).waitFor();
      const root = await elsewhere(page, "GET", "/directory?limit=1");
      const name = `from-elsewhere-${Date.now().toString(36)}`;
      const made = await elsewhere(page, "POST", "/directory", { parent_id: root.folder.id, name });
      await page.getByRole("link", { name, exact: true }).waitFor();
      await elsewhere(page, "PATCH", `/object/${made.id}`, { name: `${name}-renamed` });
      await page.getByRole("link", { name: `${name}-renamed`, exact: true }).waitFor();
    },
  ],
];
