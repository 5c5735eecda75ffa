// Two-factor sign-in: set it up from the settings (QR code and secret), turn it on with a code
// computed here as an authenticator app would (RFC 6238: HMAC-SHA-1, six digits, 30 s), keep the
// recovery codes, sign out, sign in through the code step, and turn it off again.
import { createHmac } from "node:crypto";
import { base, email, password, expected, shot, expectPath, signOut } from "../lib.mjs";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

function base32Decode(text) {
  let bits = 0;
  let value = 0;
  const out = [];
  for (const c of text.replace(/=+$/, "").toUpperCase()) {
    const index = ALPHABET.indexOf(c);
    if (index < 0) throw new Error(`not base32: ${c}`);
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

function totp(secret, step) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(step));
  const mac = createHmac("sha1", base32Decode(secret)).update(counter).digest();
  const offset = mac[mac.length - 1] & 0xf;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, "0");
}

const stepNow = () => Math.floor(Date.now() / 1000 / 30);

/** A code the server has not seen yet: the next step's, else this one's, else the last one's. */
function freshCode(secret, used) {
  const now = stepNow();
  const step = [now + 1, now, now - 1].find((s) => !used.has(s));
  used.add(step);
  return totp(secret, step);
}

export const journeys = [
  [
    "turn on two-factor sign-in, sign in again through the code step, turn it off",
    async (page) => {
      const used = new Set();
      await page.goto(base + "/settings");
      await page.getByRole("button", { name: "Set up two-factor sign-in" }).click();
      await page.getByRole("img", { name: "QR code for your authenticator app" }).waitFor();
      const secret = await page.getByLabel("Secret").inputValue();
      if (!/^[A-Z2-7]{32}$/.test(secret)) throw new Error(`the secret looks wrong: ${secret}`);
      await shot(page, "two-factor-setup");
      await page.getByLabel("Code from the app").fill(freshCode(secret, used));
      await page.getByRole("button", { name: "Turn on" }).click();
      const codes = page.getByRole("list", { name: "Recovery codes" }).getByRole("listitem");
      await codes.first().waitFor();
      if ((await codes.count()) !== 10) throw new Error(`${await codes.count()} recovery codes, expected 10`);
      await page.getByRole("button", { name: "I have saved them" }).click();
      await page.getByRole("button", { name: "Turn off two-factor sign-in" }).waitFor();

      await signOut(page);
      await expectPath(page, /^\/login$/);
      await page.getByLabel("E-mail").fill(email);
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("heading", { name: "Two-factor code" }).waitFor();
      const right = freshCode(secret, used);
      const wrong = right === "000000" ? "000001" : "000000";
      await page.getByLabel("Code", { exact: true }).fill(wrong);
      await page.getByRole("button", { name: "Verify" }).click();
      await page.getByRole("alert").filter({ hasText: "wrong" }).waitFor();
      await shot(page, "two-factor-sign-in");
      await page.getByLabel("Code", { exact: true }).fill(right);
      await page.getByRole("button", { name: "Verify" }).click();
      await expectPath(page, /^\/files$/);
      // The browser logs the code step's 428 and the wrong code's 401 as console errors: expected
      // here, not problems.
      for (const status of ["status of 428", "status of 401"]) expected(status);

      await page.goto(base + "/settings");
      await page.getByLabel("Code from the app or a recovery code").fill(freshCode(secret, used));
      await page.getByRole("button", { name: "Turn off two-factor sign-in" }).click();
      await page.getByRole("status").filter({ hasText: "Two-factor sign-in is off." }).waitFor();
      await page.getByRole("button", { name: "Set up two-factor sign-in" }).waitFor();
    },
  ],
];
