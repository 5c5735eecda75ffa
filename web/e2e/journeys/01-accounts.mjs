// Accounts: register, sign in, stay signed in across a reload.
import { base, email, password, shot, expectPath, accountButton } from "../lib.mjs";

export const journeys = [
  [
    "register, sign in, land on the file browser, reload and stay signed in",
    async (page) => {
      await page.goto(base + "/");
      await expectPath(page, /^\/login$/);
      await page.getByRole("button", { name: "Sign in" }).waitFor();
      await shot(page, "sign-in");
      await page.getByRole("link", { name: "Register" }).click();
      await expectPath(page, /^\/register$/);
      await page.getByLabel("E-mail").fill(email);
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByLabel("Repeat password").fill(password);
      await shot(page, "register");
      await page.getByRole("button", { name: "Create account" }).click();
      await expectPath(page, /^\/login$/);
      await page.getByRole("status").filter({ hasText: "Account created" }).waitFor();
      if ((await page.getByLabel("E-mail").inputValue()) !== email) throw new Error("e-mail not carried to sign-in");
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await expectPath(page, /^\/files$/);
      await page.getByRole("navigation", { name: "Folder path" }).getByText("My files").waitFor();
      await page.getByText("0 items").waitFor();
      await page.reload();
      await expectPath(page, /^\/files$/);
      await accountButton(page).waitFor();
      await page.getByText("0 items").waitFor();
    },
  ],
];
