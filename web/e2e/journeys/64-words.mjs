// Words and appearance: in the Chinese UI a refused action says why in Chinese (the error's
// stable code translated, not the server's English text), counts take the language's plural
// forms, and the password rule shows before the form is sent; the header's light/dark/auto
// switch wins over the system's scheme and is kept across a reload.
import { readFileSync } from "node:fs";
import { base, expectPath, expected, signedInPage } from "../lib.mjs";

const catalog = (name) => JSON.parse(readFileSync(new URL(`../../src/lib/i18n/${name}.json`, import.meta.url), "utf8"));
const en = catalog("en");
const zh = catalog("zh-CN");

async function words(_page, run) {
  await signedInPage(run, {}, async (page) => {
    const dialog = page.getByRole("dialog");
    const name = `Taken ${Date.now()}`;
    await page.getByRole("button", { name: en.files.new_folder }).click();
    await dialog.getByRole("textbox").fill(name);
    await dialog.getByRole("button", { name: en.files.new_folder }).click();
    await page.getByRole("link", { name }).waitFor();
    // Inside it, one folder: "1 item", the singular form.
    await page.getByRole("link", { name }).click();
    await page.getByText(en.files.empty).waitFor();
    await page.getByRole("button", { name: en.files.new_folder }).click();
    await dialog.getByRole("textbox").fill("only");
    await dialog.getByRole("button", { name: en.files.new_folder }).click();
    await page.getByRole("status").filter({ hasText: new RegExp(`^${en.files.count.one.replace("{count}", "1")}$`) }).waitFor();
    await page.getByRole("navigation", { name: en.files.breadcrumbs }).getByRole("link", { name: en.files.root }).click();
    await expectPath(page, /^\/files$/);

    // The same name again, in Chinese: a 409 object.name_taken.
    await page.evaluate(() => localStorage.setItem("nubo.lang", "zh-CN"));
    await page.reload();
    await page.getByRole("button", { name: zh.files.new_folder }).click();
    await dialog.getByRole("textbox").fill(name);
    await dialog.getByRole("button", { name: zh.files.new_folder }).click();
    const alert = page.getByRole("alert").filter({ hasText: zh.errors.object.name_taken });
    await alert.waitFor();
    if ((await alert.textContent()).includes("exists in the folder")) throw new Error("the server's English text is shown");
    expected("status of 409");

    // The password rule is on the form before it is sent.
    await page.goto(base + "/settings");
    await page.getByText(zh.auth.password_rule).first().waitFor();
  });
}

/** The page's background, as the sum of its red, green and blue (0 black to 765 white). */
const brightness = (page) =>
  page.evaluate(() => getComputedStyle(document.body).backgroundColor.match(/\d+/g).slice(0, 3).reduce((a, b) => a + Number(b), 0));

async function appearance(_page, run) {
  for (const [system, choice, dark] of [
    ["light", en.app.scheme_dark, true],
    ["dark", en.app.scheme_light, false],
  ]) {
    await signedInPage(run, { colorScheme: system }, async (page) => {
      const before = await brightness(page);
      if (dark === before < 200) throw new Error(`the ${system} system scheme shows a background of ${before}`);
      await page.getByLabel(en.app.scheme).selectOption({ label: choice });
      const after = await brightness(page);
      if (dark !== after < 200) throw new Error(`choosing ${choice} on a ${system} system shows a background of ${after}`);
      // The choice stays with the browser.
      await page.reload();
      await page.getByLabel(en.app.scheme).waitFor();
      if (dark !== (await brightness(page)) < 200) throw new Error(`${choice} was not kept across a reload`);
      await page.getByLabel(en.app.scheme).selectOption({ label: en.app.scheme_auto });
      if ((await brightness(page)) !== before) throw new Error("Auto does not follow the system again");
    });
  }
}

export const journeys = [
  ["in Chinese a refused action says why in Chinese, and the password rule shows first", words],
  ["the appearance switch chooses dark or light over the system's, and Auto follows it again", appearance],
];
