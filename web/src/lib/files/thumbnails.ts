//! Thumbnails of image files for the grid view. `<img>` cannot send the access token, so each
//! thumbnail is fetched with it and shown through a `blob:` URL (the CSP allows those). The
//! server answers 202 while it makes one; we ask again after its `Retry-After`. Loaded URLs are
//! kept per object version (the URL carries `updated_at`, so replaced content is fetched anew)
//! and the oldest are released beyond a few hundred. At most four fetches run at a time. A
//! share's visitor gets the same through the share, with its grant instead of a token.
import { session } from "../session.svelte";
import { grants } from "../share/visitor";

const IMAGE = /\.(png|jpe?g|jpe|jfif|gif|webp)$/i;
const KEEP = 300;
const PARALLEL = 4;
const ATTEMPTS = 30;

const loaded = new Map<string, Promise<string | null>>();
let running = 0;
const queue: (() => void)[] = [];

/** Whether the server may have a thumbnail for this entry (its name names an image format). */
export function mayHaveThumbnail(o: { kind: string; name: string }): boolean {
  return o.kind === "file" && IMAGE.test(o.name);
}

/**
 * A `blob:` URL of the thumbnail of file `id` as of `version` (its `updated_at`), or null when
 * it has none (or it cannot be loaded).
 */
export function thumbnailUrl(id: string, version: string, size: 256 | 1024 = 256): Promise<string | null> {
  const path = `/api/v1/object/${id}/thumbnail?size=${size}&v=${encodeURIComponent(version)}`;
  return cached(path, async (): Promise<Record<string, string>> => {
    await session.ensureFresh();
    const token = session.accessToken;
    return token ? { Authorization: `Bearer ${token}` } : {};
  });
}

/** As {@link thumbnailUrl}, for a visitor of share `code` (its grant, no session). */
export function shareThumbnailUrl(code: string, id: string, version: string, size: 256 | 1024 = 256): Promise<string | null> {
  const path = `/api/v1/share/${encodeURIComponent(code)}/thumbnail/${id}?size=${size}&v=${encodeURIComponent(version)}`;
  return cached(path, async () => grants.headers(code));
}

function cached(path: string, headers: () => Promise<Record<string, string>>): Promise<string | null> {
  let url = loaded.get(path);
  if (!url) {
    url = fetchThumbnail(path, headers);
    loaded.set(path, url);
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

async function fetchThumbnail(path: string, headers: () => Promise<Record<string, string>>): Promise<string | null> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const answer = await turn(async (): Promise<{ url: string | null } | { wait: number }> => {
      try {
        const r = await fetch(path, { headers: await headers() });
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
