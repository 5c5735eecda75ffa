// Words: in the Chinese UI a refused action says why in Chinese (the error's stable code
// translated, not the server's English text), counts take the language's plural forms, and the
// password rule shows before the form is sent.
import { readFileSync } from "node:fs";
import { base, email, password, expectPath, watch, signIn, TIMEOUT } from "../lib.mjs";

const catalog = (name) => JSON.parse(readFileSync(new URL(`../../src/lib/i18n/${name}.json`, import.meta.url), "utf8"));
const en = catalog("en");
const zh = catalog("zh-CN");

async function words(_page, run) {
  const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    watch(page);
    await signIn(page, { email, password });
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

    // The password rule is on the form before it is sent.
    await page.goto(base + "/settings");
    await page.getByText(zh.auth.password_rule).first().waitFor();
  } finally {
    await context.close();
  }
}

export const journeys = [["in Chinese a refused action says why in Chinese, and the password rule shows first", words]];
