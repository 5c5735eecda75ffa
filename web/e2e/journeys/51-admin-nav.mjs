// The administration's navigation. On a wide screen a side navigation lists the areas in groups;
// each opens a page of its own URL (named in the window's title and marked as the current one),
// which a reload keeps and the back button returns from. The site settings are pages of their
// own, each with only its settings (and saving sends only them), none taller than 2,000 px. On a
// phone the areas are one list of choices at the top, a thumb's size, and no administration page
// scrolls sideways.
import { base, shot, expectPath, signedInPage, fitsTheScreen, atLeast44, titled, adminApi } from "../lib.mjs";

const WIDE = { viewport: { width: 1440, height: 900 } };
const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 };
const AREAS = [
  ["Overview", "Dashboard", "/admin"],
  ["People", "Users", "/admin/users"],
  ["People", "Groups", "/admin/groups"],
  ["Storage", "Storage policies", "/admin/policies"],
  ["Storage", "Storage nodes", "/admin/nodes"],
  ["Storage", "Storage packs", "/admin/packs"],
  ["Storage", "Files", "/admin/files"],
  ["Sharing", "Shares", "/admin/shares"],
  ["Sharing", "Reports", "/admin/reports"],
  ["Sharing", "Redeem codes", "/admin/redeem"],
  ["Look", "Themes", "/admin/themes"],
  ["Look", "Viewers and WOPI", "/admin/viewers"],
  ["System", "Tasks", "/admin/tasks"],
  ["System", "Activity", "/admin/activity"],
  ["System", "Site settings", "/admin/settings"],
];
/** The settings' pages: title, URL, a field it shows and one of another page it must not. */
const SETTINGS = [
  ["Site", "/admin/settings/site", "Site name", "OpenID Connect client ID"],
  ["Sign-in and registration", "/admin/settings/sign-in", "Group of new users", "Site name"],
  ["OAuth providers", "/admin/settings/oauth", "OpenID Connect client ID", "Site name"],
  ["Captcha", "/admin/settings/captcha", "Turnstile site key", "Site name"],
  ["Mail", "/admin/settings/mail", "SMTP host", "Site name"],
];
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const exactly = (path) => new RegExp(`^${escape(path)}$`);

async function currentLinks(nav) {
  return nav.locator('a[aria-current="page"]').allTextContents();
}

async function onAWideScreen(run) {
  await signedInPage(run, WIDE, async (page) => {
    await page.goto(base + "/admin");
    const nav = page.getByRole("navigation", { name: "Administration areas" });
    await page.getByRole("heading", { name: "Dashboard", level: 2 }).waitFor();

    // A vertical list beside the page, in named groups.
    const navBox = await nav.boundingBox();
    const heading = await page.getByRole("heading", { level: 2 }).boundingBox();
    if (!navBox || navBox.x + navBox.width > heading.x) throw new Error(`the navigation (${JSON.stringify(navBox)}) is not beside the page (${JSON.stringify(heading)})`);
    let above = null;
    for (const [group, name] of AREAS) {
      const link = nav.getByRole("list", { name: group }).getByRole("link", { name, exact: true });
      const box = await link.boundingBox();
      if (!box) throw new Error(`${name} is not shown under ${group}`);
      if (above && (box.y <= above.y || Math.abs(box.x - above.x) > 1)) throw new Error(`${name} is not below the area before it`);
      above = box;
    }
    await shot(page, "admin-nav");

    // Each area: its own URL, its heading, the current link, the window's title.
    for (const [, name, path] of AREAS) {
      await nav.getByRole("link", { name, exact: true }).click();
      await expectPath(page, exactly(path));
      await page.getByRole("heading", { name, level: 2 }).waitFor();
      const current = await currentLinks(nav);
      if (current.join() !== name) throw new Error(`on ${path} the navigation marks ${JSON.stringify(current)} as current`);
      await titled(page, `${name} · Administration · `);
    }

    // A reload stays on the page; back returns to the one before.
    await nav.getByRole("link", { name: "Storage nodes", exact: true }).click();
    await expectPath(page, /^\/admin\/nodes$/);
    await nav.getByRole("link", { name: "Reports", exact: true }).click();
    await expectPath(page, /^\/admin\/reports$/);
    await page.reload();
    await page.getByRole("heading", { name: "Reports", level: 2 }).waitFor();
    if (new URL(page.url()).pathname !== "/admin/reports") throw new Error(`the reload went to ${page.url()}`);
    await page.goBack();
    await expectPath(page, /^\/admin\/nodes$/);
    await page.getByRole("heading", { name: "Storage nodes", level: 2 }).waitFor();
    if ((await currentLinks(nav)).join() !== "Storage nodes") throw new Error("back does not mark Storage nodes as current");

    // The settings' first page lists its pages; each is a page of its own, shorter than 2,000 px.
    await nav.getByRole("link", { name: "Site settings", exact: true }).click();
    await expectPath(page, /^\/admin\/settings$/);
    const index = page.getByRole("region", { name: "Site settings" });
    for (const [title] of SETTINGS) await index.getByRole("link", { name: title, exact: true }).waitFor();
    for (const [title, path, shows, hides] of SETTINGS) {
      await nav.getByRole("link", { name: title, exact: true }).click();
      await expectPath(page, exactly(path));
      await page.getByRole("heading", { name: title, level: 2 }).waitFor();
      await page.getByLabel(shows, { exact: true }).waitFor();
      if (await page.getByLabel(hides, { exact: true }).count()) throw new Error(`${path} also shows ${hides}`);
      const tall = await page.evaluate(() => document.documentElement.scrollHeight);
      if (tall >= 2000) throw new Error(`${path} is ${tall} px tall`);
      if ((await currentLinks(nav)).join() !== title) throw new Error(`on ${path} the navigation marks ${await currentLinks(nav)} as current`);
      await titled(page, `${title} · Site settings · Administration · `);
    }
    await page.reload();
    await page.getByLabel("SMTP host").waitFor();
    await page.goBack();
    await expectPath(page, /^\/admin\/settings\/captcha$/);

    // Saving a page sends only its own settings: every field is one of the page's groups.
    const catalog = await adminApi(run, "GET", "/admin/settings/catalog");
    const site = new Set(catalog.filter((e) => e.group === "BASIC").map((e) => e.name));
    await nav.getByRole("link", { name: "Site", exact: true }).click();
    await page.getByLabel("Site name", { exact: true }).waitFor();
    const form = page.locator("form", { has: page.getByLabel("Site name", { exact: true }) });
    const ids = await form.locator("input, select").evaluateAll((fields) => fields.map((f) => f.id.replace(/^setting-/, "")));
    const strangers = ids.filter((name) => !site.has(name));
    if (strangers.length || ids.length !== site.size) throw new Error(`the Site page edits ${ids.join(", ")}`);
    await shot(page, "admin-settings-section");
    let sent = null;
    await page.route("**/api/v1/admin/settings", (route) => {
      if (route.request().method() !== "PATCH") return route.fallback();
      sent = route.request().postDataJSON();
      return route.fulfill({ status: 204 });
    });
    const name = await page.getByLabel("Site name", { exact: true }).inputValue();
    await page.getByLabel("Site name", { exact: true }).fill(`${name} (renamed)`);
    await form.getByRole("button", { name: "Save" }).click();
    await page.getByRole("status").filter({ hasText: "Settings saved." }).waitFor();
    await page.unroute("**/api/v1/admin/settings");
    if (JSON.stringify(sent) !== JSON.stringify({ site_name: `${name} (renamed)` })) throw new Error(`saving sent ${JSON.stringify(sent)}`);

    // A page there is not says so.
    await page.goto(base + "/admin/settings/nothing-here");
    await page.getByRole("heading", { name: "There is no such administration page", level: 2 }).waitFor();
  }, run.admin);
}

async function onAPhone(run) {
  await signedInPage(run, PHONE, async (page) => {
    await page.goto(base + "/admin");
    await page.getByRole("heading", { name: "Dashboard", level: 2 }).waitFor();
    const nav = page.getByRole("navigation", { name: "Administration areas" });
    const switcher = nav.getByLabel("Go to");
    const box = await atLeast44(switcher, "the section switcher");
    const heading = await page.getByRole("heading", { name: "Dashboard", level: 2 }).boundingBox();
    if (box.y > heading.y) throw new Error("the section switcher is not at the top");
    if (await nav.getByRole("link").filter({ visible: true }).count()) throw new Error("the side list shows on a phone");
    await fitsTheScreen(page, "the administration's dashboard");
    await shot(page, "admin-nav-phone");

    // Every choice opens its page, which fits the screen; the switcher then shows it.
    const choices = await switcher.locator("option:not([disabled])").evaluateAll((options) => options.map((o) => [o.value, o.textContent]));
    if (choices.length < AREAS.length + SETTINGS.length) throw new Error(`the switcher offers ${choices.length} pages`);
    for (const [path, label] of choices.slice(1)) {
      await switcher.selectOption(path);
      await expectPath(page, exactly(path));
      await page.getByRole("heading", { level: 2 }).first().waitFor();
      await fitsTheScreen(page, `the administration's ${label}`);
      if ((await switcher.inputValue()) !== path) throw new Error(`on ${path} the switcher shows ${await switcher.inputValue()}`);
    }
    await page.goBack();
    await expectPath(page, exactly(choices.at(-2)[0]));
  }, run.admin);
}

export const journeys = [
  [
    "the administration has a side navigation, a page per area and per settings section, each with its own URL",
    async (_page, run) => {
      if (!run.admin.email || !run.admin.password) throw new Error("NUBO_E2E_ADMIN_EMAIL / _PASSWORD are not set");
      await onAWideScreen(run);
    },
  ],
  [
    "on a phone the administration's areas are one switcher at the top and no page scrolls sideways",
    async (_page, run) => {
      if (!run.admin.email || !run.admin.password) throw new Error("NUBO_E2E_ADMIN_EMAIL / _PASSWORD are not set");
      await onAPhone(run);
    },
  ],
];
