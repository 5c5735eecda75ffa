//! The images of a folder, in the order the file browser lists it (its saved sort), for the
//! image viewer's previous and next. An image is a file whose extension the server offers the
//! image viewer for. The last folder asked is kept, so stepping through it lists it once.
import type { ObjectView } from "../api/client";
import { extensionOf, viewersOf } from "../viewers";
import { listFolder } from "./ops";
import { loadPrefs } from "./prefs";

let last: { key: string; images: Promise<ObjectView[]> } | null = null;

/** The folder path (segments) an object lies in. */
export function parentOf(o: ObjectView): string[] {
  return o.path.split("/").filter(Boolean).slice(0, -1);
}

/** The images of the folder `path`; `fresh` lists it again even when it was just listed. */
export function imagesOf(path: string[], fresh = false): Promise<ObjectView[]> {
  const sort = loadPrefs().sort;
  const key = JSON.stringify([path, sort]);
  if (!fresh && last?.key === key) return last.images;
  const images = list(path, sort);
  last = { key, images };
  // A failed listing is not kept: the next ask tries again.
  images.catch(() => last?.images === images && (last = null));
  return images;
}

async function list(path: string[], sort: ReturnType<typeof loadPrefs>["sort"]): Promise<ObjectView[]> {
  let files: ObjectView[] = [];
  await listFolder(path, sort, (_folder, items) => (files = items.filter((o) => o.kind === "file")));
  const extensions = [...new Set(files.map((o) => extensionOf(o.name)))];
  const answers = await Promise.all(extensions.map(async (ext) => [ext, await viewersOf(ext)] as const));
  const shown = new Set(answers.filter(([, viewers]) => viewers.some((v) => v.kind !== "wopi" && v.name === "image")).map(([ext]) => ext));
  return files.filter((o) => shown.has(extensionOf(o.name)));
}
