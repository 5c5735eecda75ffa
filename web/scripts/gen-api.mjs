// Regenerates the API types (src/lib/api/generated/schema.d.ts) from an OpenAPI document:
// `npm run gen:api -- path/to/openapi.json`, default `openapi.json` in web/.
// CI runs `nubo-master openapi > web/openapi.json && npm run gen:api` and fails on a diff.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const input = path.resolve(process.env.INIT_CWD ?? process.cwd(), process.argv[2] ?? path.join(web, "openapi.json"));
const output = path.join(web, "src/lib/api/generated/schema.d.ts");
const bin = path.join(web, "node_modules/.bin/openapi-typescript");
execFileSync(bin, [input, "--output", output], { stdio: "inherit" });
