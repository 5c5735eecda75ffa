// A phone (390×844, touch): no page scrolls sideways; the sections sit in a bar along the
// bottom; a file uploaded from the floating button is listed with its whole name, size and date
// beneath while the upload panel shows as a sheet; the row's one "⋯" menu renames it; a long
// press selects it and the selection moves into a folder; a rename to a taken name keeps the
// typed text and offers to keep both. Every control it touches is at least
// 44 px, and the window's title names what is shown.
import { shot, expectPath, expected, signIn, signedInPage, fitsTheScreen, atLeast44, titled, signOut } from "../lib.mjs";

const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 };

/** Holds a finger on `locator` for 0.7 s (touch events, as a phone sends them). */
async function longPress(page, locator) {
  const box = await locator.boundingBox();
  const point = { x: box.x + box.width / 2, y: box.y + box.height / 2 };
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Input.dispatchTouchEvent", { type: "touchStart", touchPoints: [point] });
  await new Promise((r) => setTimeout(r, 700));
  await cdp.send("Input.dispatchTouchEvent", { type: "touchEnd", touchPoints: [] });
  await cdp.detach();
}

async function onAPhone(_page, run) {
  await signedInPage(run, PHONE, async (page) => {

    // The sections are a bar along the bottom edge, every one a thumb-sized target.
    const sections = page.getByRole("navigation", { name: "Main" });
    const bar = await sections.boundingBox();
    if (!bar || bar.y + bar.height < 844 - 2 || bar.y < 844 / 2) throw new Error(`the sections bar is at ${JSON.stringify(bar)}`);
    await atLeast44(sections.getByRole("link", { name: "Trash" }), "the Trash section");

    // A folder of its own, so what earlier journeys left in the root does not push rows out of view.
    const home = `Phone ${Date.now()}`;
    await page.getByRole("button", { name: "New folder" }).click();
    await page.getByRole("dialog").getByRole("textbox").fill(home);
    await page.getByRole("dialog").getByRole("button", { name: "New folder" }).click();
    await page.getByRole("link", { name: home }).click();
    await page.getByText("This folder is empty").waitFor();

    // Upload from the floating button, which sits above the bar.
    const upload = page.locator("button.upload");
    const floating = await atLeast44(upload, "the upload button");
    if (floating.y + floating.height > bar.y) throw new Error("the upload button hides behind the sections bar");
    const name = `Minutes of the phone journey meeting ${Date.now()}.txt`;
    const chooser = page.waitForEvent("filechooser");
    await upload.click();
    await (await chooser).setFiles({ name, mimeType: "text/plain", buffer: Buffer.from("minutes\n") });
    const row = page.getByRole("listitem").filter({ hasText: name });
    await row.waitFor();
    await row.getByText(/^8 B · /).waitFor();
    // The upload panel is a sheet above the bar, in view without scrolling.
    const sheet = await page.getByRole("region", { name: "Uploads" }).boundingBox();
    if (!sheet || sheet.y < 0 || sheet.y + sheet.height > bar.y + 1) throw new Error(`the upload panel is at ${JSON.stringify(sheet)}`);
    // The whole name shows (wrapped, not cut).
    const clipped = await row.getByRole("link", { name: `Open ${name}` }).evaluate(
      (e) => e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1,
    );
    if (clipped) throw new Error("the file's name is cut off in its row");
    await fitsTheScreen(page, "the file list");
    await shot(page, "phone-files");

    // One menu per row: rename through it.
    const menu = row.getByRole("button", { name: `Actions for ${name}` });
    await atLeast44(menu, "the row's menu button");
    await menu.click();
    const rename = page.getByRole("menuitem", { name: "Rename" });
    await atLeast44(rename, "the Rename item");
    await rename.click();
    const renamed = `Renamed on a phone ${Date.now()}.txt`;
    const field = page.getByRole("dialog").getByRole("textbox");
    await field.fill(renamed);
    await field.press("Enter");
    await page.getByRole("listitem").filter({ hasText: renamed }).waitFor();

    // Renaming another file to the taken name keeps the dialog and the text, and offers to keep both.
    const second = `Second ${Date.now()}.txt`;
    const again = page.waitForEvent("filechooser");
    await upload.click();
    await (await again).setFiles({ name: second, mimeType: "text/plain", buffer: Buffer.from("second\n") });
    const secondRow = page.getByRole("listitem").filter({ hasText: second });
    await secondRow.waitFor();
    await secondRow.getByRole("button", { name: `Actions for ${second}` }).click();
    await page.getByRole("menuitem", { name: "Rename" }).click();
    await field.fill(renamed);
    await field.press("Enter");
    await page.getByRole("dialog").getByRole("alert").filter({ hasText: "Something with this name is already here" }).waitFor();
    if ((await field.inputValue()) !== renamed) throw new Error("the typed name was lost on the conflict");
    expected("status of 409");
    const both = renamed.replace(/\.txt$/, " (1).txt");
    await page.getByRole("dialog").getByRole("button", { name: `Keep both: name it “${both}”` }).click();
    await page.getByRole("listitem").filter({ hasText: both }).waitFor();
    if (await page.getByRole("dialog").isVisible()) throw new Error("the dialog stayed open after keeping both");

    // A finger held on the row selects it; the selection moves through the folder picker.
    const target = `Phone target ${Date.now()}`;
    await page.getByRole("button", { name: "New folder" }).click();
    await page.getByRole("dialog").getByRole("textbox").fill(target);
    await page.getByRole("dialog").getByRole("button", { name: "New folder" }).click();
    await page.getByRole("link", { name: target }).waitFor();
    await longPress(page, page.getByRole("listitem").filter({ hasText: renamed }).getByRole("link"));
    const tools = page.getByRole("toolbar", { name: "Selected items" });
    await tools.getByText("1 selected").waitFor();
    if (new URL(page.url()).pathname.startsWith("/open/")) throw new Error("the long press opened the file");
    await atLeast44(tools.getByRole("button", { name: "Move…" }), "the Move button");
    await tools.getByRole("button", { name: "Move…" }).click();
    const picker = page.getByRole("dialog");
    await picker.getByRole("button", { name: `Open ${home}` }).click();
    await picker.getByRole("button", { name: `Open ${target}` }).click();
    await picker.getByRole("button", { name: "Move here" }).click();
    await page.getByRole("listitem").filter({ hasText: renamed }).waitFor({ state: "detached" });
    await page.getByRole("link", { name: target }).click();
    await page.getByRole("listitem").filter({ hasText: renamed }).waitFor();
    await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: home }).click();

    // The window's title names what is shown (the folder, the section), then the site.
    await titled(page, `${home} · `);
    for (const [link, path, title] of [
      ["Trash", /^\/trash$/, "Trash · "],
      ["My shares", /^\/shares$/, "My shares · "],
      ["Settings", /^\/settings$/, "Settings · "],
    ]) {
      await sections.getByRole("link", { name: link }).click();
      await expectPath(page, path);
      await fitsTheScreen(page, `the ${link} page`);
      await titled(page, title);
    }
    await shot(page, "phone-settings");

    if (run.admin.email && run.admin.password) {
      await signOut(page);
      await expectPath(page, /^\/login$/);
      await signIn(page, run.admin);
      await sections.getByRole("link", { name: "Admin", exact: true }).click();
      await expectPath(page, /^\/admin$/);
      await fitsTheScreen(page, "the administration overview");
      // 51-admin-nav goes through every administration page on a phone.
    }
  });
}

export const journeys = [
  ["on a phone nothing scrolls sideways, uploads start from a floating button, a row's menu renames, a long press selects", onAPhone],
];
