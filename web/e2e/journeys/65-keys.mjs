// Keys: Backspace and Alt+↑ open the folder above, ? lists every shortcut, and the window's
// title follows the folder.
import { base, expectPath, TIMEOUT } from "../lib.mjs";

async function keys(page) {
  const dialog = page.getByRole("dialog");
  const outer = `Keys ${Date.now()}`;
  await page.goto(base + "/files");
  await expectPath(page, /^\/files$/);
  await page.getByRole("button", { name: "New folder" }).click();
  await dialog.getByRole("textbox").fill(outer);
  await dialog.getByRole("button", { name: "New folder" }).click();
  await page.getByRole("link", { name: outer }).click();
  await page.getByRole("button", { name: "New folder" }).click();
  await dialog.getByRole("textbox").fill("inner");
  await dialog.getByRole("button", { name: "New folder" }).click();
  await page.getByRole("link", { name: "inner" }).click();
  await expectPath(page, /\/inner$/);
  await page.getByText("This folder is empty").waitFor();
  await page.waitForFunction(() => document.title.startsWith("inner · "), null, { timeout: TIMEOUT });

  await page.keyboard.press("Backspace");
  await expectPath(page, new RegExp(`^/files/${encodeURIComponent(outer)}$`));
  await page.getByRole("link", { name: "inner" }).waitFor();
  await page.waitForFunction((outer) => document.title.startsWith(`${outer} · `), outer, { timeout: TIMEOUT });
  await page.keyboard.press("Alt+ArrowUp");
  await expectPath(page, /^\/files$/);

  await page.keyboard.press("?");
  const help = page.getByRole("dialog", { name: "Keyboard shortcuts" });
  await help.getByText("Open the folder above").waitFor();
  await page.keyboard.press("Escape");
  await help.waitFor({ state: "hidden" });
  // Typing in a field is typing: Backspace there does not leave the folder.
  await page.getByRole("link", { name: outer }).click();
  await page.getByRole("searchbox").fill("ab");
  await page.getByRole("searchbox").press("Backspace");
  if ((await page.getByRole("searchbox").inputValue()) !== "a") throw new Error("Backspace did not edit the search field");
  await expectPath(page, new RegExp(`^/files/${encodeURIComponent(outer)}$`));
}

export const journeys = [["Backspace and Alt+↑ open the folder above, ? lists the shortcuts", keys]];
