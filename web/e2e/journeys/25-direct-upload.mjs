// Direct uploads: a user whose group stores on a storage node (a real nubo-slave the test
// harness started, named by NUBO_E2E_NODE_ID) uploads through the app; every chunk goes from
// the browser straight to the node (another origin: the node's CORS and the page's CSP allow it),
// none through the master, and the file downloads with the source's bytes.
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { adminApi, rowAction, shot, signIn, watch, TIMEOUT } from "../lib.mjs";

const MIB = 1024 * 1024;
const sha256 = (b) => createHash("sha256").update(b).digest("hex");

export const journeys = [
  [
    "upload to a storage node straight from the browser, then download the same bytes",
    async (_page, run) => {
      const nodeId = process.env.NUBO_E2E_NODE_ID;
      if (!nodeId) throw new Error("NUBO_E2E_NODE_ID is not set: the harness starts a storage node for this journey");
      const node = await adminApi(run, "GET", `/admin/node/${nodeId}`);
      const suffix = Date.now().toString(36);
      const policy = await adminApi(run, "POST", "/admin/policy", {
        name: `Node ${suffix}`, type: "local", chunk_size: MIB, is_private: true, node_id: nodeId,
      });
      const group = await adminApi(run, "POST", "/admin/group", {
        name: `Node users ${suffix}`, is_admin: false, max_storage: 1024 * MIB, trash_retention_days: 7,
        permissions: { share: true, webdav: false, external_download: false }, policy_ids: [policy.id],
      });
      const who = { email: `direct-${suffix}@example.com`, password: "direct-password-1" };
      await adminApi(run, "POST", "/admin/user", { email: who.email, password: who.password, group_id: group.id });

      const context = await run.browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        page.setDefaultTimeout(TIMEOUT);
        watch(page);
        const toNode = [];
        const toMaster = [];
        page.on("request", (r) => {
          const url = new URL(r.url());
          if (r.url().startsWith(node.base_url) && r.method() === "PUT") toNode.push(url.pathname);
          if (/\/api\/v1\/file\/upload\/[^/]+\/\d+$/.test(url.pathname)) toMaster.push(url.pathname);
        });
        await signIn(page, who);

        const source = randomBytes(5 * MIB + 12345);
        await page.locator("#upload-input:not([disabled])").waitFor({ state: "attached" });
        await page.locator("#upload-input").setInputFiles({ name: "on-node.bin", mimeType: "application/octet-stream", buffer: source });
        const queue = page.getByRole("region", { name: "Uploads" });
        await queue.getByText("Done").waitFor({ timeout: 60_000 });
        if (toNode.length !== 6) throw new Error(`${toNode.length} chunks went to the node, expected 6`);
        if (toMaster.length) throw new Error(`${toMaster.length} chunks went through the master`);
        await shot(page, "upload-direct");

        const list = page.getByRole("list", { name: "Contents of My files" });
        const [download] = await Promise.all([
          page.waitForEvent("download"),
          rowAction(list, "on-node.bin", "Download", "last"),
        ]);
        const got = sha256(readFileSync(await download.path()));
        if (got !== sha256(source)) throw new Error("the downloaded file differs from the source");
      } finally {
        await context.close();
      }
    },
  ],
];
