//! Thumbnails of image files for the grid view. `<img>` cannot send the access token, so each
//! thumbnail is fetched with it and shown through a `blob:` URL (the CSP allows those). The
//! server answers 202 while it makes one; we ask again after its `Retry-After`. Loaded URLs are
//! kept per object version (the URL carries `updated_at`, so replaced content is fetched anew)
//! and the oldest are released beyond a few hundred. At most four fetches run at a time.
import type { ObjectView } from "../api/client";
import { session } from "../session.svelte";

const IMAGE = /\.(png|jpe?g|jpe|jfif|gif|webp)$/i;
const KEEP = 300;
const PARALLEL = 4;
const ATTEMPTS = 30;

const loaded = new Map<string, Promise<string | null>>();
let running = 0;
const queue: (() => void)[] = [];

/** Whether the server may have a thumbnail for this entry (its name names an image format). */
export function mayHaveThumbnail(o: ObjectView): boolean {
  return o.kind === "file" && IMAGE.test(o.name);
}

/**
 * A `blob:` URL of the thumbnail of file `id` as of `version` (its `updated_at`), or null when
 * it has none (or it cannot be loaded).
 */
export function thumbnailUrl(id: string, version: string, size: 256 | 1024 = 256): Promise<string | null> {
  const key = `${id}@${version}/${size}`;
  let url = loaded.get(key);
  if (!url) {
    url = fetchThumbnail(id, version, size);
    loaded.set(key, url);
    release();
  }
  return url;
}

/** The thumbnail `thumbnailUrl` was already asked for (a preload), without asking for one. */
export function knownThumbnail(id: string, version: string, size: 256 | 1024 = 256): Promise<string | null> | null {
  return loaded.get(`${id}@${version}/${size}`) ?? null;
}

function release(): void {
  while (loaded.size > KEEP) {
    const [oldest, url] = loaded.entries().next().value as [string, Promise<string | null>];
    loaded.delete(oldest);
    void url.then((u) => u && URL.revokeObjectURL(u));
  }
}

async function turn<T>(work: () => Promise<T>): Promise<T> {
  if (running >= PARALLEL) await new Promise<void>((go) => queue.push(go));
  running++;
  try {
    return await work();
  } finally {
    running--;
    queue.shift()?.();
  }
}

const pause = (seconds: number) => new Promise((done) => setTimeout(done, seconds * 1000));

async function fetchThumbnail(id: string, version: string, size: number): Promise<string | null> {
  const path = `/api/v1/object/${id}/thumbnail?size=${size}&v=${encodeURIComponent(version)}`;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const answer = await turn(async (): Promise<{ url: string | null } | { wait: number }> => {
      await session.ensureFresh();
      const token = session.accessToken;
      try {
        const r = await fetch(path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
        if (r.status === 200) return { url: URL.createObjectURL(await r.blob()) };
        if (r.status === 202) return { wait: Math.min(10, Math.max(1, Number(r.headers.get("Retry-After")) || 1)) };
      } catch {
        // Offline or the server went away: the icon stays.
      }
      return { url: null };
    });
    if ("url" in answer) return answer.url;
    await pause(answer.wait);
  }
  return null;
}
