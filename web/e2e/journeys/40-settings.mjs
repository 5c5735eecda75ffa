// Settings: a theme colour applies live (the computed colour of a themed button changes) and
// stays after a reload once saved; a WebDAV account shows its password once.
import { base, shot, expectPath } from "../lib.mjs";

const ROSE_600 = "rgb(225, 29, 72)";

export const journeys = [
  [
    "pick another primary colour: the page changes at once and keeps it after a reload",
    async (page) => {
      await page.goto(base + "/settings");
      await expectPath(page, /^\/settings$/);
      const save = page.getByRole("button", { name: "Save theme" });
      const colour = () => save.evaluate((el) => getComputedStyle(el).backgroundColor);
      const before = await colour();
      await page.getByLabel("Primary", { exact: true }).selectOption("rose");
      const after = await colour();
      if (after === before || after !== ROSE_600) throw new Error(`primary colour ${before} -> ${after}, expected ${ROSE_600}`);
      await save.click();
      await page.getByRole("status").filter({ hasText: "Theme saved." }).waitFor();
      await page.reload();
      await page.getByRole("button", { name: "Save theme" }).waitFor();
      const kept = await page.getByRole("button", { name: "Save theme" }).evaluate((el) => getComputedStyle(el).backgroundColor);
      if (kept !== ROSE_600) throw new Error(`after a reload the primary colour is ${kept}`);
      await shot(page, "settings");
    },
  ],
  [
    "create a WebDAV account: its password is shown once, with the connection URL",
    async (page) => {
      await page.goto(base + "/settings");
      await page.getByLabel("Account name").fill("journey-laptop");
      await page.getByRole("button", { name: "Create account" }).click();
      const created = page.getByRole("group", { name: "Account “journey-laptop” created" });
      const password = await created.getByLabel("Password", { exact: true }).inputValue();
      if (password.length < 12) throw new Error(`the generated password looks wrong: ${password.length} characters`);
      const user = await created.getByLabel("User name").inputValue();
      if (!user.endsWith("/journey-laptop")) throw new Error(`user name ${user}`);
      const url = await page.getByLabel("Connection URL").inputValue();
      if (url !== `${base}/dav`) throw new Error(`connection URL ${url}`);
      await page.getByRole("list", { name: "Your WebDAV accounts" }).getByText("journey-laptop").waitFor();
      await page.reload();
      await page.getByRole("list", { name: "Your WebDAV accounts" }).getByText("journey-laptop").waitFor();
      if (await page.getByRole("group", { name: /created/ }).count()) throw new Error("the password is shown again after a reload");
    },
  ],
];
