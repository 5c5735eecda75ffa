// The image viewer, PDF and code: in a fresh folder of three pictures, a PDF and a Rust file,
// the second picture opens in the lightbox; → and ← step through the folder's pictures (the
// address following), zoom in scales the image, the back button comes back to it and Escape
// returns to the folder. On a phone a swipe goes to the next picture, a pinch zooms and the
// controls are thumb-sized. A PDF's frame is titled by the file's name and so is the window; the
// Rust file shows highlighted tokens, and the highlighter is fetched only when code is opened.
import { base, shot, expectPath, fillFolder, signedInPage, png, TIMEOUT } from "../lib.mjs";

const DESKTOP = { viewport: { width: 1440, height: 900 } };
const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 };

/** A one-page PDF that says `text` (offsets computed, so any reader takes it). */
function pdf(text) {
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
    null,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  const stream = `BT /F1 18 Tf 30 100 Td (${text}) Tj ET`;
  objects[3] = `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`;
  let out = "%PDF-1.4\n";
  const offsets = objects.map((body, i) => {
    const at = out.length;
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
    return at;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const at of offsets) out += `${String(at).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}

/** The scale of the lightbox's image (its transform's), once the image has loaded. */
async function scaleOf(page, name) {
  const image = page.getByRole("img", { name, exact: true });
  await page.waitForFunction((img) => img.complete && img.naturalWidth > 0, await image.elementHandle(), { timeout: TIMEOUT });
  return image.evaluate((img) => new DOMMatrixReadOnly(getComputedStyle(img).transform).a);
}

async function shows(page, ids, name) {
  await expectPath(page, new RegExp(`^/open/${ids[name]}$`));
  const scale = await scaleOf(page, name);
  if (scale !== 1) throw new Error(`${name} opens at scale ${scale}, not fitted`);
}

/** Moves one finger (or two, pinching) along `steps` through DevTools touch events. */
async function touch(page, paths) {
  const cdp = await page.context().newCDPSession(page);
  const at = (i) => paths.map((p, id) => ({ x: p[i][0], y: p[i][1], id }));
  await cdp.send("Input.dispatchTouchEvent", { type: "touchStart", touchPoints: at(0) });
  for (let i = 1; i < paths[0].length; i++) {
    await cdp.send("Input.dispatchTouchEvent", { type: "touchMove", touchPoints: at(i) });
  }
  await cdp.send("Input.dispatchTouchEvent", { type: "touchEnd", touchPoints: [] });
  await cdp.detach();
}

const line = (from, to, n = 8) =>
  Array.from({ length: n + 1 }, (_, i) => [from[0] + ((to[0] - from[0]) * i) / n, from[1] + ((to[1] - from[1]) * i) / n]);

export const journeys = [
  [
    "pictures step and zoom in the lightbox, a PDF is titled by its name and code is highlighted",
    async (_page, run) => {
      const tag = Date.now().toString(36);
      const folder = `gallery-${tag}`;
      const names = ["a-red.png", "b-green.png", "c-blue.png"];
      const colours = [[200, 40, 40], [40, 160, 60], [40, 70, 200]];
      const files = names.map((n, i) => [n, png(1600, 1000, (x, y) => (((x >> 6) + (y >> 6)) % 2 ? colours[i] : [240, 240, 240]))]);
      files.push(["notes.pdf", pdf("Lightbox journey")]);
      files.push(["main.rs", Buffer.from('// The entry point.\nfn main() {\n    let greeting = "hello";\n    println!("{greeting}");\n}\n')]);
      let ids;

      await signedInPage(run, DESKTOP, async (page) => {
        const requests = [];
        page.on("request", (r) => requests.push(new URL(r.url()).pathname));
        const highlighter = () => requests.filter((p) => /^\/assets\/highlight-[\w-]+\.js$/.test(p));
        ids = await fillFolder(page, folder, files);
        await page.goto(`${base}/files/${folder}`);
        await page.getByRole("link", { name: `Open ${names[1]}` }).click();
        const box = page.getByRole("dialog", { name: `Image viewer: ${names[1]}` });
        await box.waitFor();
        await shows(page, ids, names[1]);
        await box.getByText("2 of 3", { exact: true }).waitFor();
        await shot(page, "lightbox");

        // → and ← follow the folder's listing (the PDF and the code are not pictures).
        await page.keyboard.press("ArrowRight");
        await shows(page, ids, names[2]);
        await page.getByText("3 of 3", { exact: true }).waitFor();
        if (await page.getByRole("button", { name: "Next image" }).count()) throw new Error("the last picture offers a next one");
        await page.keyboard.press("ArrowLeft");
        await shows(page, ids, names[1]);
        await page.getByRole("button", { name: "Previous image" }).click();
        await shows(page, ids, names[0]);
        await page.getByRole("button", { name: "Next image" }).click();
        await shows(page, ids, names[1]);

        // Zoom: the button scales the image up, Fit brings it back, a double-click shows 1:1.
        await page.getByRole("button", { name: "Zoom in" }).click();
        const zoomed = await scaleOf(page, names[1]);
        if (!(zoomed > 1.2)) throw new Error(`zoom in left the scale at ${zoomed}`);
        await page.getByRole("button", { name: "Fit to the screen" }).click();
        if ((await scaleOf(page, names[1])) !== 1) throw new Error("Fit does not fit the picture again");
        await page.getByRole("img", { name: names[1], exact: true }).dblclick();

        const actual = await page.getByRole("img", { name: names[1], exact: true }).evaluate((img) => {
          const shown = img.getBoundingClientRect().width;
          return shown / img.naturalWidth;
        });
        if (Math.abs(actual - 1) > 0.02) throw new Error(`a double-click shows the picture at ${actual}:1, not 1:1`);

        // Escape goes back to the folder; the back button returns to the picture.
        await page.keyboard.press("Escape");
        await expectPath(page, new RegExp(`^/files/${folder}$`));
        await page.getByRole("link", { name: `Open ${names[0]}` }).waitFor();
        await page.goBack();
        await shows(page, ids, names[1]);
        await page.reload();
        await shows(page, ids, names[1]);
        await page.getByRole("link", { name: "Close the image viewer" }).click();
        await page.getByRole("link", { name: `Open ${names[0]}` }).waitFor();

        // The PDF: its frame and the window are titled by the file's name.
        await page.getByRole("link", { name: "Open notes.pdf" }).click();
        const frame = page.locator('iframe[title="notes.pdf"]');
        await frame.waitFor();
        await page.waitForFunction(() => document.title.startsWith("notes.pdf"), null, { timeout: TIMEOUT }).catch(async () => {
          throw new Error(`the window is titled ${JSON.stringify(await page.title())} while the PDF shows`);
        });
        // Chromium's reader took the document (a refused frame shows an error page instead). It
        // names the document by its blob: URL's last part, a UUID; the window keeps the name.
        const reader = (f) => f.url().startsWith("chrome-extension://mhjfbmdgcfjbbpaeojofohoefgiehjai/");
        for (let waited = 0; !page.frames().some(reader); waited += 100) {
          if (waited > TIMEOUT) throw new Error(`no PDF reader among ${page.frames().map((f) => f.url())}`);
          await page.waitForTimeout(100);
        }
        if (!(await page.title()).startsWith("notes.pdf")) throw new Error(`the window is titled ${await page.title()}`);
        await page.getByRole("link", { name: "← Back to the folder" }).click();

        // Code: the highlighter is fetched only now, and the Rust file shows its tokens.
        if (highlighter().length) throw new Error(`the highlighter was fetched before any code: ${highlighter()}`);
        await page.getByRole("link", { name: "Open main.rs" }).click();
        const code = page.getByLabel("Content of main.rs");
        await code.locator(".hljs-keyword").first().waitFor();
        const tokens = await code.evaluate((pre) => [...pre.querySelectorAll("[class^=hljs-]")].map((e) => `${e.className}:${e.textContent}`));
        for (const want of ["hljs-keyword:fn", "hljs-string:\"hello\"", "hljs-comment:// The entry point."]) {
          if (!tokens.includes(want)) throw new Error(`no ${want} among ${JSON.stringify(tokens)}`);
        }
        if (!highlighter().length) throw new Error("the highlighter came with no request of its own");
        await shot(page, "viewer-code");
        // Editing is the plain text, and the read view highlights what was typed.
        await page.getByRole("button", { name: "Edit", exact: true }).click();
        const editor = page.getByRole("textbox", { name: "Content of main.rs" });
        await editor.fill("fn other() {}\n");
        await page.getByRole("button", { name: "Edit", exact: true }).click();
        await code.locator(".hljs-title", { hasText: "other" }).waitFor();
        page.once("dialog", (d) => d.accept());
        await page.getByRole("link", { name: "← Back to the folder" }).click();
        await page.getByRole("link", { name: "Open main.rs" }).waitFor();
      });

      // A phone: a swipe to the left shows the next picture, a pinch zooms.
      await signedInPage(run, PHONE, async (page) => {
        await page.goto(`${base}/open/${ids[names[0]]}`);
        await shows(page, ids, names[0]);
        for (const label of ["Close the image viewer", "Next image", "Zoom in"]) {
          const b = await page.getByRole(label.startsWith("Close") ? "link" : "button", { name: label }).boundingBox();
          if (!b || b.width < 44 || b.height < 44) throw new Error(`${label} is ${JSON.stringify(b)}, under 44×44 px`);
        }
        const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
        if (wide > 0) throw new Error(`the lightbox scrolls sideways by ${wide} px`);
        await touch(page, [line([320, 420], [60, 430])]);
        await shows(page, ids, names[1]);
        await touch(page, [line([160, 420], [40, 420]), line([230, 420], [350, 420])]);
        const pinched = await scaleOf(page, names[1]);
        if (!(pinched > 1.5)) throw new Error(`a pinch left the scale at ${pinched}`);
        await shot(page, "lightbox-phone");
      });
    },
  ],
];
