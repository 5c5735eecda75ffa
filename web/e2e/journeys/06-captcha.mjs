// Captcha: the administrator turns the built-in captcha on for registration (through the API);
// a signed-out visitor's registration form shows the image, a "New image" button that draws
// another, and a labelled answer field; a wrong answer is refused with the captcha message and
// a new image. A browser cannot read the answer (the API tests use the right one). The setting
// is turned off again whatever happens, so later journeys register without one.
import { base, email, password, expected, shot, expectPath, adminApi, watch } from "../lib.mjs";

export const journeys = [
  [
    "with the built-in captcha on registration, the form shows the image and refuses a wrong answer",
    async (_page, run) => {
      await adminApi(run, "PATCH", "/admin/settings", { captcha_register: "builtin" });
      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        watch(page);
        await page.goto(base + "/register");
        await expectPath(page, /^\/register$/);
        const image = page.getByRole("img", { name: "Captcha image" });
        await image.waitFor();
        const first = await image.getAttribute("src");
        if (!first?.startsWith("data:image/png;base64,")) throw new Error(`not a PNG data URI: ${first?.slice(0, 40)}`);
        await page.getByRole("button", { name: "New image" }).click();
        await page.waitForFunction((src) => document.querySelector("img[alt='Captcha image']")?.getAttribute("src") !== src, first);
        await page.getByLabel("E-mail").fill(`captcha-${email}`);
        await page.getByLabel("Password", { exact: true }).fill(password);
        await page.getByLabel("Repeat password").fill(password);
        await page.getByLabel("Type the characters in the image").fill("wrong");
        const shown = await image.getAttribute("src");
        await shot(page, "captcha-register");
        await page.getByRole("button", { name: "Create account" }).click();
        await page.getByRole("alert").filter({ hasText: "The captcha answer was wrong or expired" }).waitFor();
        await expectPath(page, /^\/register$/);
        // The refused answer used the image up: a new one is shown and the field is empty.
        await page.waitForFunction((src) => document.querySelector("img[alt='Captcha image']")?.getAttribute("src") !== src, shown);
        if ((await page.getByLabel("Type the characters in the image").inputValue()) !== "") throw new Error("answer kept");
        // The refusal is the subject here, not a problem.
        expected("status of 403");
      } finally {
        await context.close();
        await adminApi(run, "PATCH", "/admin/settings", { captcha_register: "none" });
      }
    },
  ],
];
