// Gestures of the file browser at 1440×900: a right-click opens the entry's menu at the pointer
// (Escape gives the focus back to the row; a rename to a taken name keeps the typed text and
// offers to keep both); the Menu key and Shift+F10 open it on the focused row; a file dragged
// onto a folder moves there (Undo in the toast moves it back), with Ctrl it is copied; dragged
// onto a breadcrumb it moves up; a folder dragged into itself is refused with a message; trash
// then Undo brings a file back; a rubber band in the grid selects the tiles it touches (Shift
// adds); a missing folder shows one state, not an error and "empty" at once.
import { base, expectPath, expected, pick, shot, signedInPage } from "../lib.mjs";

async function gestures(_page, run) {
  await signedInPage(run, { viewport: { width: 1440, height: 900 } }, async (page) => {
    const dialog = page.getByRole("dialog");
    const home = `Gestures ${Date.now()}`;
    const newFolder = async (name) => {
      await page.getByRole("button", { name: "New folder" }).click();
      await dialog.getByRole("textbox").fill(name);
      await dialog.getByRole("button", { name: "New folder" }).click();
      await page.getByRole("link", { name, exact: true }).waitFor();
    };
    await newFolder(home);
    await page.getByRole("link", { name: home, exact: true }).click();
    await page.getByText("This folder is empty").waitFor();
    const list = page.getByRole("list", { name: `Contents of ${home}` });
    /** The row of `name` in the folder shown (by its checkbox: names here overlap). */
    const row = (name, where = list) =>
      where.getByRole("listitem").filter({ has: page.getByRole("checkbox", { name: `Select ${name}`, exact: true }) });
    const toast = page.getByRole("status").filter({ has: page.getByRole("button", { name: "Dismiss" }) });

    await newFolder("Inbox");
    await newFolder("Archive");
    await pick(page, "#upload-input", ["a.txt", "b.txt", "c.txt"].map((name) => ({ name, mimeType: "text/plain", buffer: Buffer.from(name) })));
    for (const name of ["a.txt", "b.txt", "c.txt"]) await row(name).waitFor();

    // A right-click opens the row's menu where the pointer is; Escape closes it and the focus
    // goes back to the row.
    const c = await row("c.txt").getByText(/^\d+ B$/).boundingBox();
    await page.mouse.click(c.x + 2, c.y + 2, { button: "right" });
    const menu = page.getByRole("menu", { name: "Actions for c.txt" });
    const at = await menu.boundingBox();
    if (Math.abs(at.x - (c.x + 2)) > 4 || Math.abs(at.y - (c.y + 2)) > 4) {
      throw new Error(`the context menu opened at ${at.x},${at.y}, not at the pointer (${c.x + 2},${c.y + 2})`);
    }
    await menu.getByRole("menuitem", { name: "Open" }).waitFor();
    await page.keyboard.press("ArrowDown");
    const second = await menu.getByRole("menuitem").nth(1).evaluate((e) => e === document.activeElement);
    if (!second) throw new Error("ArrowDown did not move to the menu's second item");
    await page.keyboard.press("Escape");
    await menu.waitFor({ state: "detached" });
    if (!(await row("c.txt").locator(".entry").evaluate((e) => e === document.activeElement))) {
      throw new Error("the focus did not go back to the row after Escape");
    }

    // Right-click → Rename to a taken name: the text stays, keeping both is offered.
    await row("b.txt").click({ button: "right" });
    await page.getByRole("menu", { name: "Actions for b.txt" }).waitFor();
    await shot(page, "context-menu");
    await page.getByRole("menu", { name: "Actions for b.txt" }).getByRole("menuitem", { name: "Rename" }).click();
    const field = dialog.getByRole("textbox");
    await field.fill("a.txt");
    await field.press("Enter");
    await dialog.getByRole("alert").filter({ hasText: "Something with this name is already here" }).waitFor();
    expected("status of 409");
    if ((await field.inputValue()) !== "a.txt") throw new Error("the typed name was lost on the conflict");
    await dialog.getByRole("button", { name: "Keep both: name it “a (1).txt”" }).click();
    await row("a (1).txt").waitFor();
    await toast.filter({ hasText: "Renamed to “a (1).txt”." }).waitFor();

    // The Menu key and Shift+F10 open the menu of the focused row.
    for (const key of ["ContextMenu", "Shift+F10"]) {
      await row("a.txt").locator(".entry").focus();
      await page.keyboard.press(key);
      const keyed = page.getByRole("menu", { name: "Actions for a.txt" });
      await keyed.getByRole("menuitem", { name: "Rename" }).waitFor();
      if (!(await keyed.getByRole("menuitem").first().evaluate((e) => e === document.activeElement))) {
        throw new Error(`${key} opened the menu without focusing its first item`);
      }
      await page.keyboard.press("Escape");
      await keyed.waitFor({ state: "detached" });
    }

    // Dragged onto a folder, a file moves there; Undo moves it back.
    await row("c.txt").dragTo(row("Inbox"));
    await row("c.txt").waitFor({ state: "detached" });
    await toast.filter({ hasText: "Moved “c.txt” to Inbox." }).getByRole("button", { name: "Undo" }).click();
    await row("c.txt").waitFor();
    await row("c.txt").dragTo(row("Inbox"));
    await row("c.txt").waitFor({ state: "detached" });

    // With Ctrl held, it is copied: still here, and in the folder too.
    await page.keyboard.down("Control");
    await row("a.txt").dragTo(row("Archive"));
    await page.keyboard.up("Control");
    await toast.filter({ hasText: "Copied “a.txt” to Archive." }).waitFor();
    await row("a.txt").waitFor();

    // A folder dragged into itself (with the selection it is part of) is refused, and says why.
    await row("Inbox").getByRole("checkbox").check();
    await row("Archive").getByRole("checkbox").check();
    await row("Archive").dragTo(row("Inbox"));
    await page.getByRole("alert").filter({ hasText: "A folder cannot go into itself or into a folder inside it." }).waitFor();
    await row("Archive").waitFor();
    await page.keyboard.press("Escape");

    await page.getByRole("link", { name: "Archive", exact: true }).click();
    await row("a.txt", page.getByRole("list", { name: "Contents of Archive" })).waitFor();
    await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: home }).click();
    await page.getByRole("link", { name: "Inbox", exact: true }).click();
    const inbox = page.getByRole("list", { name: "Contents of Inbox" });
    await row("c.txt", inbox).waitFor();

    // Dragged onto a breadcrumb, it moves up there.
    await row("c.txt", inbox).dragTo(page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: home }));
    await page.getByText("This folder is empty").waitFor();
    await page.getByRole("navigation", { name: "Folder path" }).getByRole("link", { name: home }).click();
    await row("c.txt").waitFor();

    // Trash, then Undo: the file is back.
    await row("a (1).txt").click({ button: "right" });
    await page.getByRole("menu", { name: "Actions for a (1).txt" }).getByRole("menuitem", { name: "Delete" }).click();
    await dialog.getByRole("button", { name: "Delete" }).click();
    await row("a (1).txt").waitFor({ state: "detached" });
    await toast.filter({ hasText: "Moved “a (1).txt” to the trash." }).getByRole("button", { name: "Undo" }).click();
    await row("a (1).txt").waitFor();
    await toast.filter({ hasText: "Undone." }).waitFor();

    // The grid: a rubber band from empty space selects the tiles it touches; with Shift it adds.
    await page.getByRole("button", { name: "Grid view" }).click();
    const tiles = list.getByRole("listitem");
    await tiles.nth(4).waitFor();
    const box = await list.boundingBox();
    const tile = async (i) => tiles.nth(i).boundingBox();
    const [t0, t1, t3] = [await tile(0), await tile(1), await tile(3)];
    const below = t0.y + t0.height + 40;
    const tools = page.getByRole("toolbar", { name: "Selected items" });
    await page.mouse.move(box.x + 3, below);
    await page.mouse.down();
    await page.mouse.move(t1.x + t1.width / 2, below - 60, { steps: 4 });
    await page.mouse.move(t1.x + t1.width / 2, t1.y + t1.height / 2, { steps: 4 });
    await page.mouse.up();
    await tools.getByText("2 selected").waitFor();
    if (!(await tiles.nth(0).evaluate((e) => e.classList.contains("selected")))) throw new Error("the band did not select the first tile");
    await page.keyboard.down("Shift");
    await page.mouse.move(t3.x + 20, below);
    await page.mouse.down();
    await page.mouse.move(t3.x + 30, t3.y + t3.height / 2, { steps: 4 });
    await page.mouse.up();
    await page.keyboard.up("Shift");
    await tools.getByText("3 selected").waitFor();
    if (await tiles.nth(2).evaluate((e) => e.classList.contains("selected"))) throw new Error("the band selected a tile it did not touch");
    // A click on empty space clears the selection.
    await page.mouse.click(box.x + 3, below);
    await tools.waitFor({ state: "detached" });
    await page.getByRole("button", { name: "List view" }).click();

    // A folder that is not there: one state, with the way back to the root.
    await page.goto(`${base}/files/${encodeURIComponent(home)}/Nowhere`);
    await page.getByText("This folder does not exist.").waitFor();
    expected("status of 404");
    if (await page.getByText("This folder is empty").count()) throw new Error("the missing folder also says it is empty");
    if (await page.getByRole("alert").count()) throw new Error("the missing folder also shows an error");
    await page.getByRole("link", { name: "Go to My files" }).click();
    await expectPath(page, /^\/files$/);
  });
}

export const journeys = [
  ["right-click menus, the Menu key, drag to move or copy, Undo in a toast, a rubber band, one state for a missing folder", gestures],
];
