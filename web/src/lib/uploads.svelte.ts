//! The upload queue: each file goes through the resumable chunked API (create a session, PUT
//! the chunks, a few in flight, the last answer carries the file), into the folder it was
//! dropped in plus the sub-folders it came from (created on the way, reused when they exist).
//! Progress counts the bytes of chunks in flight (XHR upload events), so the bars move inside
//! a chunk; a chunk counts for good only once the server acknowledged it. Pause aborts the
//! chunks in flight; resume asks the server which chunks it has. Unfinished uploads are kept in
//! localStorage (per user: session id, file identity, destination) so that after a reload they
//! are listed, and resume when the same file (name, size, lastModified) is picked again. A file
//! whose name is taken in its folder can be sent again to replace that file's content (the
//! session is created anew with `overwrite`; the old content becomes a version), or to sit
//! beside it under the first free name ("notes (1).md").
import { api, ApiError, client, toApiError, type ObjectView, type Schemas } from "./api/client";
import { session } from "./session.svelte";
import { jwtClaims } from "./jwt";
import { t } from "./i18n/index.svelte";
import type { PickedFile } from "./files/picked";
import { freeName } from "./files/ops";

type UploadSession = Schemas["UploadSessionView"];
/** `interrupted`: known from a previous page load; waits for its file to be picked again. */
export type UploadState = "queued" | "uploading" | "paused" | "interrupted" | "done" | "failed";

export interface UploadItem {
  id: number;
  name: string;
  size: number;
  lastModified: number;
  /** Folders below the target, outermost first. */
  dir: string[];
  /** The folder the file (or its folder) was dropped in. */
  target: { id: string; path: string };
  /** null for an interrupted upload until the file is picked again. */
  file: File | null;
  /** The folder the file goes into, once known (target + dir). */
  parentId: string | null;
  sessionId: string | null;
  loaded: number;
  /** Bytes per second over the current run. */
  speed: number;
  state: UploadState;
  error: string | null;
  /** Refused because an item of that name is in the folder (`replace` may overwrite it). */
  clash: boolean;
  /** Replace the content of the file of that name (asked for after a clash). */
  overwrite: boolean;
  /** The name it is sent under when not its own (Keep both after a clash: "notes (1).md"). */
  as: string | null;
  object: ObjectView | null;
}

interface Stored {
  name: string;
  size: number;
  lastModified: number;
  dir: string[];
  target: { id: string; path: string };
  parentId: string | null;
  sessionId: string | null;
  loaded: number;
  as?: string | null;
}

const PARALLEL_CHUNKS = 3;
const PARALLEL_FILES = 2;
const RETRIES = 3;

function identity(i: { name: string; size: number; lastModified: number; dir: string[] }): string {
  return [i.name, i.size, i.lastModified, i.dir.join("/")].join("|");
}

function storeKey(): string {
  const sub = jwtClaims<{ sub?: string }>(session.accessToken)?.sub ?? "anonymous";
  return `nubo.uploads.${sub}`;
}

/** A user-facing message for an upload failure, from the API's stable error codes. */
export function uploadError(e: unknown, name: string): string {
  if (!(e instanceof ApiError)) return String(e);
  switch (e.code) {
    case "file.too_large":
      return t("uploads.too_large");
    case "storage.quota_exceeded":
      return t("uploads.quota");
    case "object.name_taken":
      return t("uploads.name_taken", { name });
    case "http.network":
      return t("uploads.network");
  }
  if (e.status === 413) return t("uploads.too_large");
  if (e.status === 507) return t("uploads.quota");
  return e.message;
}

/** Sends one chunk with XHR (fetch has no upload progress); resolves to the parsed answer. */
function xhrPut(
  url: string,
  token: string | null,
  blob: Blob,
  signal: AbortSignal,
  progress: (sent: number) => void,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open("PUT", url);
    if (token) x.setRequestHeader("Authorization", `Bearer ${token}`);
    x.setRequestHeader("Content-Type", "application/octet-stream");
    x.upload.onprogress = (e) => progress(e.loaded);
    x.onload = () => {
      let body: unknown = null;
      try {
        body = JSON.parse(x.responseText);
      } catch {
        /* not JSON: the status speaks */
      }
      resolve({ status: x.status, body });
    };
    x.onerror = () => reject(new ApiError(0, "http.network", "network error"));
    x.onabort = () => reject(new DOMException("aborted", "AbortError"));
    if (signal.aborted) return reject(new DOMException("aborted", "AbortError"));
    signal.addEventListener("abort", () => x.abort(), { once: true });
    x.send(blob);
  });
}

/** PUTs a chunk to the master (refreshing the token once on 401) or straight to its node. */
async function putChunk(
  s: UploadSession,
  index: number,
  blob: Blob,
  signal: AbortSignal,
  progress: (sent: number) => void,
): Promise<UploadSession> {
  for (let attempt = 0; ; attempt++) {
    let out: { status: number; body: unknown };
    try {
      if (s.direct) {
        // Node-backed policy: the chunk goes to the storage node with the session's credential.
        out = await xhrPut(`${s.direct.url}/${index}`, s.direct.credential, blob, signal, progress);
      } else {
        await session.ensureFresh();
        const url = `/api/v1/file/upload/${encodeURIComponent(s.id)}/${index}`;
        out = await xhrPut(url, session.accessToken, blob, signal, progress);
        if (out.status === 401 && (await session.refresh())) {
          out = await xhrPut(url, session.accessToken, blob, signal, progress);
        }
      }
    } catch (e) {
      // A dropped connection: wait a little and send the chunk again (PUT is idempotent).
      if (signal.aborted || attempt >= RETRIES) throw e;
      progress(0);
      await new Promise((r) => setTimeout(r, 1000 * 2 ** attempt));
      continue;
    }
    if (out.status >= 200 && out.status < 300) return out.body as UploadSession;
    // A chunk another request is still sending (or one whose master died, for a few seconds)
    // is free again soon: wait and send it again.
    const busy = out.status === 409 && (out.body as { code?: string } | null)?.code === "upload.chunk_busy";
    if ((busy || out.status === 503 || out.status >= 502) && attempt < RETRIES && !signal.aborted) {
      progress(0);
      await new Promise((r) => setTimeout(r, 1000 * 2 ** attempt));
      continue;
    }
    throw toApiError(new Response(null, { status: out.status }), out.body);
  }
}

/** A node's view of a direct upload (`GET {url}`): chunks received, and the master's verdict. */
interface NodeStatus {
  received?: number[];
  completed?: boolean;
  object?: ObjectView | null;
  result?: { status: number; body: { object?: ObjectView | null } & Record<string, unknown> };
}
async function nodeStatus(s: UploadSession): Promise<NodeStatus | null> {
  try {
    const res = await fetch(s.direct!.url, { headers: { Authorization: `Bearer ${s.direct!.credential}` } });
    return res.ok ? ((await res.json()) as NodeStatus) : null;
  } catch {
    return null;
  }
}

/** Which chunks the server already holds: the master says, or for a direct upload the node. */
async function chunksHeld(s: UploadSession): Promise<number[]> {
  if (!s.direct) return s.uploaded;
  return (await nodeStatus(s))?.received ?? [];
}

/**
 * The file of a direct upload whose last chunk was answered 202 (the node had not heard back
 * from the master yet): ask the node until its `result` arrives.
 */
async function directResult(s: UploadSession, signal: AbortSignal): Promise<ObjectView | null> {
  for (let i = 0; i < 30 && !signal.aborted; i++) {
    const st = await nodeStatus(s);
    if (st?.result) {
      if (st.result.status >= 200 && st.result.status < 300) return st.result.body.object ?? null;
      throw toApiError(new Response(null, { status: st.result.status }), st.result.body);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  return null;
}

class Uploads {
  items = $state<UploadItem[]>([]);
  /** Called with the folder whose contents changed (a file arrived, a folder was created). */
  onChange: ((folderId: string) => void) | null = null;
  #next = 1;
  #running = 0;
  #aborts = new Map<number, AbortController>();
  #folders = new Map<string, Promise<string>>();
  /** The names a Keep both tried, per item. */
  #tried = new Map<number, Set<string>>();
  #restoredFor: string | null = null;

  /** Everything not finished, over all files in the list. */
  get totals(): { size: number; loaded: number; speed: number; active: number } {
    let size = 0;
    let loaded = 0;
    let speed = 0;
    let active = 0;
    for (const i of this.items) {
      size += i.size;
      loaded += i.state === "done" ? i.size : i.loaded;
      if (i.state === "uploading") {
        speed += i.speed;
        active++;
      }
    }
    return { size, loaded, speed, active };
  }

  /** Lists the unfinished uploads of an earlier page load (once per signed-in user). */
  restore(): void {
    const key = storeKey();
    if (this.#restoredFor === key) return;
    this.#restoredFor = key;
    for (const s of this.#stored()) {
      if (this.items.some((i) => identity(i) === identity(s))) continue;
      this.items.push({ ...s, id: this.#next++, file: null, speed: 0, state: "interrupted", error: null, clash: false, overwrite: false, as: s.as ?? null, object: null });
    }
  }

  add(picked: PickedFile[], target: { id: string; path: string }): void {
    for (const { file, dir } of picked) {
      const ident = identity({ name: file.name, size: file.size, lastModified: file.lastModified, dir });
      const known = this.items.find(
        (i) => (i.state === "interrupted" || i.state === "paused" || i.state === "failed") && identity(i) === ident,
      );
      if (known) {
        // The same file again: continue the earlier session where it was going.
        known.file = file;
        known.state = "queued";
        known.error = null;
        known.clash = false;
        continue;
      }
      this.items.push({
        id: this.#next++,
        name: file.name,
        size: file.size,
        lastModified: file.lastModified,
        dir,
        target,
        file,
        parentId: dir.length ? null : target.id,
        sessionId: null,
        loaded: 0,
        speed: 0,
        state: "queued",
        error: null,
        clash: false,
        overwrite: false,
        as: null,
        object: null,
      });
    }
    this.#pump();
  }

  pause(id: number): void {
    const it = this.#item(id);
    if (!it || (it.state !== "uploading" && it.state !== "queued")) return;
    it.state = "paused";
    it.speed = 0;
    this.#aborts.get(id)?.abort();
  }

  resume(id: number): void {
    const it = this.#item(id);
    if (!it?.file || (it.state !== "paused" && it.state !== "failed")) return;
    it.state = "queued";
    it.error = null;
    it.clash = false;
    this.#pump();
  }

  /** Sends a file whose name was taken again, replacing the content of the file of that name. */
  replace(id: number): void {
    const it = this.#item(id);
    if (!it?.file || it.state !== "failed" || !it.clash) return;
    // A session made without `overwrite` cannot become one: start over with a new session.
    if (it.sessionId) void this.#drop(it.sessionId);
    it.sessionId = null;
    it.loaded = 0;
    it.overwrite = true;
    it.clash = false;
    it.error = null;
    it.state = "queued";
    this.#pump();
  }

  /** Sends a file whose name was taken again, under the first free name beside that file. */
  keepBoth(id: number): void {
    const it = this.#item(id);
    if (!it?.file || it.state !== "failed" || !it.clash) return;
    if (it.sessionId) void this.#drop(it.sessionId);
    it.sessionId = null;
    it.loaded = 0;
    it.as = this.#another(it);
    it.clash = false;
    it.error = null;
    it.state = "queued";
    this.#pump();
  }

  /** The next name to try for a file kept beside the one of its name. */
  #another(it: UploadItem): string {
    const tried = this.#tried.get(it.id) ?? new Set([it.name]);
    if (it.as) tried.add(it.as);
    this.#tried.set(it.id, tried);
    return freeName(it.name, tried);
  }

  /** Stops the upload and deletes its server-side session (releasing the reserved space). */
  async cancel(id: number): Promise<void> {
    const it = this.#item(id);
    if (!it) return;
    this.#aborts.get(id)?.abort();
    this.items = this.items.filter((i) => i.id !== id);
    this.#forget(it);
    if (it.sessionId) await this.#drop(it.sessionId);
  }

  async #drop(sessionId: string): Promise<void> {
    await api(() => client.DELETE("/api/v1/file/upload/{id}", { params: { path: { id: sessionId } } })).catch(
      () => undefined,
    );
  }

  clearFinished(): void {
    this.items = this.items.filter((i) => i.state !== "done");
  }

  #item(id: number): UploadItem | undefined {
    return this.items.find((i) => i.id === id);
  }

  #stored(): Stored[] {
    try {
      const v = JSON.parse(localStorage.getItem(storeKey()) ?? "[]");
      return Array.isArray(v) ? v : [];
    } catch {
      return [];
    }
  }
  #save(it: UploadItem): void {
    const rest = this.#stored().filter((s) => identity(s) !== identity(it));
    const { name, size, lastModified, dir, target, parentId, sessionId, loaded, as } = it;
    rest.push({ name, size, lastModified, dir, target, parentId, sessionId, loaded, as });
    localStorage.setItem(storeKey(), JSON.stringify(rest));
  }
  #forget(it: UploadItem): void {
    const rest = this.#stored().filter((s) => identity(s) !== identity(it));
    if (rest.length) localStorage.setItem(storeKey(), JSON.stringify(rest));
    else localStorage.removeItem(storeKey());
  }

  #pump(): void {
    while (this.#running < PARALLEL_FILES) {
      const item = this.items.find((i) => i.state === "queued" && i.file);
      if (!item) return;
      this.#running++;
      item.state = "uploading";
      this.#run(item).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  /** The id of folder `dir` below `target`, creating what is missing (once per folder). */
  #folder(target: { id: string; path: string }, dir: string[]): Promise<string> {
    if (!dir.length) return Promise.resolve(target.id);
    const key = target.id + "/" + dir.join("/");
    let p = this.#folders.get(key);
    if (!p) {
      p = this.#folder(target, dir.slice(0, -1)).then(async (parent_id) => {
        const name = dir[dir.length - 1];
        try {
          const made = await api(() => client.POST("/api/v1/directory", { body: { parent_id, name } }));
          this.onChange?.(parent_id);
          return made.id;
        } catch (e) {
          if (!(e instanceof ApiError && e.code === "object.name_taken")) throw e;
          // It exists already: find its id by path.
          const path = [...target.path.split("/").filter(Boolean), ...dir].join("/");
          const page = await api(() =>
            client.GET("/api/v1/directory/{path}", { params: { path: { path }, query: { limit: 1 } } }),
          );
          return page.folder.id;
        }
      });
      p.catch(() => this.#folders.delete(key));
      this.#folders.set(key, p);
    }
    return p;
  }

  /** An earlier session when the server still has it, else a new one. */
  async #session(it: UploadItem): Promise<UploadSession> {
    if (it.sessionId) {
      const sid = it.sessionId;
      try {
        return await api(() => client.GET("/api/v1/file/upload/{id}", { params: { path: { id: sid } } }));
      } catch (e) {
        if (!(e instanceof ApiError && (e.status === 404 || e.status === 410))) throw e;
        it.sessionId = null;
      }
    }
    const parent_id = it.parentId!;
    const open = () =>
      api(() =>
        client.POST("/api/v1/file/upload", {
          body: { file_name: it.as ?? it.name, file_size: it.size, parent_id, ...(it.overwrite ? { overwrite: true } : {}) },
        }),
      );
    let s: UploadSession;
    for (let tries = 1; ; tries++) {
      try {
        s = await open();
        break;
      } catch (e) {
        // Keeping both, and "notes (1).md" is taken too: the next free name.
        if (!it.as || tries >= 50 || !(e instanceof ApiError && e.code === "object.name_taken")) throw e;
        it.as = this.#another(it);
      }
    }
    it.sessionId = s.id;
    this.#save(it);
    return s;
  }

  async #run(item: UploadItem): Promise<void> {
    // Work on the proxied item so progress updates reach the UI.
    const it = this.#item(item.id) ?? item;
    const file = it.file!;
    const ctrl = new AbortController();
    this.#aborts.set(it.id, ctrl);
    try {
      it.parentId ??= await this.#folder(it.target, it.dir);
      const s = await this.#session(it);
      if (ctrl.signal.aborted) {
        // Cancelled while the session was being opened: the cancel did not know its id yet.
        if (!this.#item(it.id)) await this.#drop(s.id);
        return;
      }
      let object = s.object ?? null;
      const chunk = s.chunk_size;
      const size = it.size;
      const have = new Set(await chunksHeld(s));
      const todo: number[] = [];
      let confirmed = 0;
      for (let i = 0; i < s.total_chunks; i++) {
        const len = Math.min(size, (i + 1) * chunk) - i * chunk;
        if (have.has(i)) confirmed += len;
        else todo.push(i);
      }
      const inflight = new Map<number, number>();
      const show = () => {
        let sent = confirmed;
        for (const v of inflight.values()) sent += v;
        it.loaded = Math.min(size, sent);
        const secs = (performance.now() - started) / 1000;
        if (secs > 0.3) it.speed = Math.max(0, (it.loaded - startLoaded) / secs);
      };
      const started = performance.now();
      const startLoaded = confirmed;
      it.loaded = confirmed;
      this.#save(it);
      const worker = async () => {
        for (let i = todo.shift(); i !== undefined && !ctrl.signal.aborted; i = todo.shift()) {
          const blob = file.slice(i * chunk, Math.min(size, (i + 1) * chunk));
          const idx = i;
          const answer = await putChunk(s, idx, blob, ctrl.signal, (n) => {
            inflight.set(idx, n);
            show();
          });
          inflight.delete(idx);
          confirmed += blob.size;
          show();
          this.#save(it);
          if (answer?.object) object = answer.object;
        }
      };
      await Promise.all(Array.from({ length: Math.min(PARALLEL_CHUNKS, todo.length) }, worker));
      // Paused or cancelled; unless the last chunk's answer already brought the file.
      if (ctrl.signal.aborted && !object) return;
      if (!object && s.direct) object = await directResult(s, ctrl.signal);
      else if (!object) {
        const done = await api(() =>
          client.POST("/api/v1/file/upload/{id}/complete", { params: { path: { id: s.id } } }),
        );
        object = (done as UploadSession).object ?? null;
      }
      this.#forget(it);
      it.loaded = size;
      it.object = object;
      it.state = "done";
      it.speed = 0;
      this.onChange?.(object?.parent_id ?? it.parentId!);
    } catch (e) {
      if (ctrl.signal.aborted) return; // paused or cancelled: not a failure
      it.state = "failed";
      it.speed = 0;
      it.error = uploadError(e, it.name);
      it.clash = e instanceof ApiError && e.code === "object.name_taken";
      // A refused upload (size, quota, name) will not succeed by resuming: forget its session.
      if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 401) this.#forget(it);
    } finally {
      // A resume may already have started a new run with its own controller.
      if (this.#aborts.get(it.id) === ctrl) this.#aborts.delete(it.id);
    }
  }
}

export const uploads = new Uploads();
