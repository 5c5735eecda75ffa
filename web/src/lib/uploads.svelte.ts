//! The upload queue: each file goes through the resumable chunked API (create a session, PUT
//! the chunks, a few in flight, the last answer carries the file). Progress is per file, in
//! bytes acknowledged by the server. Unfinished sessions are remembered in localStorage by
//! file identity, so picking the same file again into the same folder resumes it.
import { api, ApiError, client, toApiError, type ObjectView, type Schemas } from "./api/client";

type UploadSession = Schemas["UploadSessionView"];
export type UploadState = "queued" | "uploading" | "done" | "failed";

export interface UploadItem {
  id: number;
  file: File;
  parentId: string;
  loaded: number;
  state: UploadState;
  error: string | null;
  object: ObjectView | null;
}

const PARALLEL_CHUNKS = 3;
const PARALLEL_FILES = 2;
const RESUME_KEY = "nubo.uploads";

function resumeKey(file: File, parentId: string): string {
  return [parentId, file.name, file.size, file.lastModified].join("|");
}
function resumeMap(): Record<string, string> {
  try {
    return JSON.parse(localStorage.getItem(RESUME_KEY) ?? "{}");
  } catch {
    return {};
  }
}
function remember(key: string, sessionId: string | null): void {
  const m = resumeMap();
  if (sessionId) m[key] = sessionId;
  else delete m[key];
  localStorage.setItem(RESUME_KEY, JSON.stringify(m));
}

/** Reuses a remembered session when the server still has it, else starts a new one. */
async function openSession(item: UploadItem): Promise<UploadSession> {
  const key = resumeKey(item.file, item.parentId);
  const known = resumeMap()[key];
  if (known) {
    try {
      return await api(() => client.GET("/api/v1/file/upload/{id}", { params: { path: { id: known } } }));
    } catch {
      remember(key, null);
    }
  }
  const s = await api(() =>
    client.POST("/api/v1/file/upload", {
      body: { file_name: item.file.name, file_size: item.file.size, parent_id: item.parentId },
    }),
  );
  remember(key, s.id);
  return s;
}

async function putChunk(s: UploadSession, index: number, blob: Blob): Promise<UploadSession> {
  if (s.direct) {
    // Node-backed policy: the chunk goes straight to the storage node.
    const res = await fetch(`${s.direct.url}/${index}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${s.direct.credential}`, "Content-Type": "application/octet-stream" },
      body: blob,
    });
    const body = await res.json().catch(() => null);
    if (!res.ok) throw toApiError(res, body);
    return body as UploadSession;
  }
  return api(() =>
    client.PUT("/api/v1/file/upload/{id}/{index}", {
      params: { path: { id: s.id, index } },
      body: blob as unknown as number[],
      bodySerializer: (b: unknown) => b as Blob,
      headers: { "Content-Type": "application/octet-stream" },
    }),
  );
}

class Uploads {
  items = $state<UploadItem[]>([]);
  /** Called with each finished file (the file browser refreshes its listing). */
  onDone: ((o: ObjectView) => void) | null = null;
  #next = 1;
  #running = 0;

  add(files: Iterable<File>, parentId: string): void {
    for (const file of files) {
      this.items.push({ id: this.#next++, file, parentId, loaded: 0, state: "queued", error: null, object: null });
    }
    this.#pump();
  }

  clearFinished(): void {
    this.items = this.items.filter((i) => i.state === "queued" || i.state === "uploading");
  }

  #pump(): void {
    while (this.#running < PARALLEL_FILES) {
      const item = this.items.find((i) => i.state === "queued");
      if (!item) return;
      this.#running++;
      this.#run(item).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  async #run(item: UploadItem): Promise<void> {
    // Work on the proxied item so progress updates reach the UI.
    const it = this.items.find((i) => i.id === item.id) ?? item;
    it.state = "uploading";
    try {
      const s = await openSession(it);
      let object = s.object ?? null;
      const size = it.file.size;
      const chunk = s.chunk_size;
      const have = new Set(s.uploaded);
      const todo: number[] = [];
      for (let i = 0; i < s.total_chunks; i++) if (!have.has(i)) todo.push(i);
      it.loaded = Math.min(size, (s.total_chunks - todo.length) * chunk);
      const worker = async () => {
        for (let i = todo.shift(); i !== undefined; i = todo.shift()) {
          const blob = it.file.slice(i * chunk, Math.min(size, (i + 1) * chunk));
          const answer = await putChunk(s, i, blob);
          it.loaded += blob.size;
          if (answer.object) object = answer.object;
        }
      };
      await Promise.all(Array.from({ length: Math.min(PARALLEL_CHUNKS, todo.length) }, worker));
      if (!object) {
        const done = await api(() =>
          client.POST("/api/v1/file/upload/{id}/complete", { params: { path: { id: s.id } } }),
        );
        object = (done as UploadSession).object ?? null;
      }
      remember(resumeKey(it.file, it.parentId), null);
      it.loaded = size;
      it.object = object;
      it.state = "done";
      if (object) this.onDone?.(object);
    } catch (e) {
      it.state = "failed";
      it.error = e instanceof ApiError ? e.message : String(e);
    }
  }
}

export const uploads = new Uploads();
