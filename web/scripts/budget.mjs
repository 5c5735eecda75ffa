// Prints the gzipped size of the JavaScript that the built index.html loads on first visit
// (entry scripts and their modulepreloads), and fails when it exceeds the budget.
// Usage: node scripts/budget.mjs [distDir]   (default: $NUBO_WEB_OUT or web/dist)
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { fileURLToPath } from "node:url";
import path from "node:path";

// Issue 54: under 120 KB (109 KB when it was set).
const BUDGET = 120 * 1024;
const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.resolve(process.argv[2] ?? process.env.NUBO_WEB_OUT ?? path.join(web, "dist"));
const html = readFileSync(path.join(dist, "index.html"), "utf8");
const scripts = new Set();
for (const m of html.matchAll(/<(?:script|link)\b[^>]*?(?:src|href)="\/?(assets\/[^"]+\.js)"/g)) scripts.add(m[1]);
let total = 0;
for (const rel of scripts) {
  const size = gzipSync(readFileSync(path.join(dist, rel)), { level: 9 }).length;
  total += size;
  console.log(`  ${rel}  ${(size / 1024).toFixed(1)} KB gzip`);
}
console.log(`first-load JS: ${(total / 1024).toFixed(1)} KB gzipped (budget ${BUDGET / 1024} KB)`);
if (total > BUDGET) {
  console.error("over the JavaScript budget");
  process.exit(1);
}
