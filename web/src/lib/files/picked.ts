//! Files chosen for upload with their folder below the drop target: from a drop (folders walked
//! through `webkitGetAsEntry`) or from an `<input type=file>` (with `webkitdirectory`, each file
//! carries its `webkitRelativePath`).
export interface PickedFile {
  file: File;
  /** Folders between the drop target and the file, outermost first ([] for a plain file). */
  dir: string[];
}

export function fromInput(files: FileList | null | undefined): PickedFile[] {
  return Array.from(files ?? [], (file) => {
    const parts = (file.webkitRelativePath || file.name).split("/").filter(Boolean);
    return { file, dir: parts.slice(0, -1) };
  });
}

/**
 * Files of a drop, folders included. The entries must be taken while the drop event is being
 * dispatched (the DataTransfer is emptied afterwards), hence the synchronous first step.
 */
export function fromDrop(dt: DataTransfer | null): Promise<PickedFile[]> {
  if (!dt) return Promise.resolve([]);
  const entries = Array.from(dt.items ?? [])
    .filter((i) => i.kind === "file")
    .map((i) => i.webkitGetAsEntry?.() ?? null);
  if (!entries.length || entries.some((e) => e === null)) {
    return Promise.resolve(Array.from(dt.files, (file) => ({ file, dir: [] })));
  }
  return Promise.all(entries.map((e) => walk(e as FileSystemEntry, []))).then((lists) => lists.flat());
}

async function walk(entry: FileSystemEntry, dir: string[]): Promise<PickedFile[]> {
  if (entry.isFile) {
    const file = await new Promise<File>((ok, fail) => (entry as FileSystemFileEntry).file(ok, fail));
    return [{ file, dir }];
  }
  if (!entry.isDirectory) return [];
  const reader = (entry as FileSystemDirectoryEntry).createReader();
  const out: PickedFile[] = [];
  // readEntries answers in batches (100 in Chromium) until an empty one.
  for (;;) {
    const batch = await new Promise<FileSystemEntry[]>((ok, fail) => reader.readEntries(ok, fail));
    if (!batch.length) break;
    for (const child of batch) out.push(...(await walk(child, [...dir, entry.name])));
  }
  return out;
}
