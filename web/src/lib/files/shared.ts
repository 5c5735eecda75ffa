//! Files another app shared to Nubo (the manifest's share target, on a phone's share sheet):
//! the service worker (public/sw.js) keeps them in a cache until the file browser takes them,
//! once, into the upload queue.
import type { PickedFile } from "./picked";

export const SHARED_CACHE = "nubo-shared";

export async function takeShared(): Promise<PickedFile[]> {
  if (!("caches" in window)) return [];
  const cache = await caches.open(SHARED_CACHE);
  const taken: PickedFile[] = [];
  for (const request of await cache.keys()) {
    const answer = await cache.match(request);
    await cache.delete(request);
    if (!answer) continue;
    const blob = await answer.blob();
    const name = decodeURIComponent(answer.headers.get("x-nubo-name") ?? "") || "shared";
    taken.push({ file: new File([blob], name, { type: blob.type }), dir: [] });
  }
  return taken;
}
