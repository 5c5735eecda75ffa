// Fails the build when the catalogs of `src/lib/i18n/` disagree: a key of the English one that
// another lacks (or has more), or a message whose `{placeholders}` differ. A message may be a
// string or an object of plural forms (`{"one": ..., "other": ...}`), which counts as one key.
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const folder = path.join(path.dirname(fileURLToPath(import.meta.url)), "../src/lib/i18n");
const isPlural = (v) => v && typeof v === "object" && typeof v.other === "string";

/** Dotted key → the set of placeholders its message (every plural form) uses. */
function leaves(catalog, prefix = "", out = new Map()) {
  for (const [key, value] of Object.entries(catalog)) {
    const name = prefix + key;
    if (typeof value === "string" || isPlural(value)) {
      const texts = typeof value === "string" ? [value] : Object.values(value);
      out.set(name, new Set(texts.flatMap((text) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))));
    } else if (value && typeof value === "object") {
      leaves(value, `${name}.`, out);
    } else {
      out.set(name, null);
    }
  }
  return out;
}

const load = (file) => leaves(JSON.parse(readFileSync(path.join(folder, file), "utf8")));
const english = load("en.json");
const problems = [];
for (const file of readdirSync(folder).filter((f) => f.endsWith(".json") && f !== "en.json")) {
  const other = load(file);
  for (const [key, names] of english) {
    if (!other.has(key)) problems.push(`${file}: ${key} is missing`);
    else if (other.get(key) === null) problems.push(`${file}: ${key} is not a message`);
    else if (names && [...names].sort().join() !== [...other.get(key)].sort().join()) {
      problems.push(`${file}: ${key} uses {${[...other.get(key)].join("}, {")}} where English uses {${[...names].join("}, {")}}`);
    }
  }
  for (const key of other.keys()) if (!english.has(key)) problems.push(`${file}: ${key} is not in en.json`);
}
if (problems.length) {
  console.error(`the translations disagree with en.json:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`translations: ${english.size} messages in every catalog`);
