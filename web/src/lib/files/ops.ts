//! The file browser's calls to the API: listing a folder (every page, in the chosen order),
//! trash (and its undo), move, copy, single downloads, ZIP archives of a selection and a file's versions. Components call these
//! and show the thrown ApiError's message; nothing here touches the UI.
import { api, client, type ObjectView, type Schemas } from "../api/client";

export type Version = Schemas["VersionView"];

export type SortKey = "name" | "size" | "updated_at";
export interface Sort {
  key: SortKey;
  desc: boolean;
}

const PAGE = 1000;
/** The first page of a listing is smaller: a screenful and then some, shown while the rest
 * arrives (in Lighthouse's mobile run a first page of 1,000 put the first rows 0.3 s later). */
const FIRST_PAGE = 200;

/**
 * Lists a folder by path (every page: FIRST_PAGE, then PAGE at a time), calling `progress`
 * after each page so the list fills in while the rest arrives. Stops early when `stale()` turns true.
 */
export async function listFolder(
  path: string[],
  sort: Sort,
  progress: (folder: ObjectView, items: ObjectView[], count: number) => void,
  stale: () => boolean = () => false,
): Promise<void> {
  let offset = 0;
  let acc: ObjectView[] = [];
  for (;;) {
    const page = await directoryPage(path, { offset, limit: offset ? PAGE : FIRST_PAGE, order: sort.key, desc: sort.desc });
    if (stale()) return;
    acc = acc.concat(page.items);
    progress(page.folder, acc, page.count);
    offset += page.items.length;
    if (!page.items.length || offset >= page.count) return;
  }
}

/** The sub-folders of a folder (listings put folders first, so paging stops at the first file). */
export async function listSubfolders(path: string[]): Promise<{ folder: ObjectView; folders: ObjectView[] }> {
  let offset = 0;
  const folders: ObjectView[] = [];
  for (;;) {
    const query = { offset, limit: PAGE, order: "name" as const };
    const page = path.length
      ? await api(() => client.GET("/api/v1/directory/{path}", { params: { path: { path: path.join("/") }, query } }))
      : await api(() => client.GET("/api/v1/directory", { params: { query } }));
    const more = page.items.filter((o) => o.kind === "folder");
    folders.push(...more);
    offset += page.items.length;
    if (more.length < page.items.length || !page.items.length || offset >= page.count) {
      return { folder: page.folder, folders };
    }
  }
}

export function trash(ids: string[]): Promise<unknown> {
  return api(() => client.DELETE("/api/v1/object", { body: { ids } }));
}
export function move(ids: string[], dst: string): Promise<unknown> {
  return api(() => client.PATCH("/api/v1/object", { body: { src_ids: ids, dst_id: dst } }));
}
export function copy(ids: string[], dst: string): Promise<ObjectView[]> {
  return api(() => client.POST("/api/v1/object/copies", { body: { src_ids: ids, dst_id: dst } }));
}
/** Takes objects out of the trash, back where they were (an Undo of `trash`). */
export function restore(ids: string[]): Promise<unknown> {
  return api(() => client.PATCH("/api/v1/trash/restore", { body: { ids } }));
}
/** Moves each object back into the folder it was in (an Undo of `move`). */
export async function moveBack(list: readonly ObjectView[]): Promise<void> {
  const by = new Map<string, string[]>();
  for (const o of list) if (o.parent_id) by.set(o.parent_id, [...(by.get(o.parent_id) ?? []), o.id]);
  for (const [parent, ids] of by) await move(ids, parent);
}

/** The folder at a path (parts; [] is the root). */
export async function folderAt(path: string[]): Promise<ObjectView> {
  return (await directoryPage(path, { limit: 1 })).folder;
}

type DirectoryQuery = { offset?: number; limit?: number; order?: Sort["key"]; desc?: boolean };

/** One page of the folder at a path (the root has its own route). */
function directoryPage(path: string[], query: DirectoryQuery): Promise<Schemas["DirectoryView"]> {
  return path.length
    ? api(() => client.GET("/api/v1/directory/{path}", { params: { path: { path: path.join("/") }, query } }))
    : api(() => client.GET("/api/v1/directory", { params: { query } }));
}
/**
 * The first of `name`, "name (1)", "name (2)", ... (before the extension: "notes (1).md") that
 * none of `taken` holds, as peers name a copy kept beside the original.
 */
export function freeName(name: string, taken: Iterable<string>): string {
  const used = new Set(taken);
  if (!used.has(name)) return name;
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  for (let n = 1; ; n++) {
    const candidate = `${stem} (${n})${ext}`;
    if (!used.has(candidate)) return candidate;
  }
}

export function rename(id: string, name: string): Promise<unknown> {
  return api(() => client.PATCH("/api/v1/object/{id}", { params: { path: { id } }, body: { name } }));
}

/** Starts a browser download of a URL of ours (the answer carries Content-Disposition). */
function save(url: string, name?: string): void {
  const a = document.createElement("a");
  a.href = url;
  if (name) a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
}

export async function download(o: ObjectView): Promise<void> {
  const tok = await api(() => client.POST("/api/v1/file/download/{id}", { params: { path: { id: o.id } } }));
  save(tok.url, o.name);
}

/** A ZIP of the given objects (folders with their contents), through a single-use token. */
export async function downloadArchive(ids: string[]): Promise<void> {
  const tok = await api(() => client.POST("/api/v1/file/archive", { body: { ids } }));
  save(tok.url);
}

/** A file's earlier contents, newest first. */
export function listVersions(id: string): Promise<Version[]> {
  return api(() => client.GET("/api/v1/object/{id}/versions", { params: { path: { id } } }));
}

/** Downloads one version under the file's name. */
export async function downloadVersion(o: ObjectView, vid: string): Promise<void> {
  const tok = await api(() =>
    client.POST("/api/v1/object/{id}/versions/{vid}/download", { params: { path: { id: o.id, vid } } }),
  );
  save(tok.url, o.name);
}

/** Makes a version the file's content again (the current content becomes a version); answers the file. */
export function restoreVersion(id: string, vid: string): Promise<ObjectView> {
  return api(() => client.POST("/api/v1/object/{id}/versions/{vid}/restore", { params: { path: { id, vid } } }));
}

export function deleteVersion(id: string, vid: string): Promise<unknown> {
  return api(() => client.DELETE("/api/v1/object/{id}/versions/{vid}", { params: { path: { id, vid } } }));
}
