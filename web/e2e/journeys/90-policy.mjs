// Last: no console error or CSP violation on any page the journeys visited.
import { base, problems, visited } from "../lib.mjs";

export const journeys = [
  [
    "no console errors or CSP violations on the pages visited",
    async (page, run) => {
      const response = run.firstResponse;
      for (const p of ["/settings", "/no/such/page"]) {
        await page.goto(base + p);
        await page.locator("main").waitFor();
      }
      const csp = response?.headers()["content-security-policy"];
      if (!csp) problems.push("the app's index.html was served without a Content-Security-Policy header");
      if (problems.length) throw new Error(`${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
      console.log(`  pages visited: ${[...visited].join(", ")}`);
    },
  ],
];
