// The app's service worker. It keeps the app shell only: the content-hashed scripts and styles
// (`/assets/`, never changed once built) and the offline page. It never stores an API answer,
// a file's bytes or anything carrying a token: those requests go to the network untouched.
// Pages are fetched from the network first (their security policy depends on the site's
// settings), the offline page answering when the network cannot. A file shared to Nubo from
// another app (the manifest's share target) is kept here until the file browser takes it.
const SHELL = "nubo-shell-v1";
const SHARED = "nubo-shared";
const OFFLINE = "/offline.html";

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(SHELL).then((cache) => cache.add(OFFLINE)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  const keep = new Set([SHELL, SHARED]);
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((name) => !keep.has(name)).map((name) => caches.delete(name))))
      .then(() => self.clients.claim()),
  );
});

/** The API, WebDAV and WOPI: never answered from here. */
const isService = (path) => ["/api/", "/dav", "/wopi"].some((prefix) => path.startsWith(prefix));

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin || isService(url.pathname)) return;
  if (request.method === "POST" && url.pathname === "/share-target") return event.respondWith(receiveShare(request));
  if (request.method !== "GET") return;
  if (url.pathname.startsWith("/assets/")) return event.respondWith(fromShell(request));
  if (request.mode === "navigate") {
    event.respondWith(fetch(request).catch(() => caches.match(OFFLINE).then((page) => page ?? Response.error())));
  }
});

/** A hashed asset: from the shell cache, else fetched and kept (only a complete 200). */
async function fromShell(request) {
  const cache = await caches.open(SHELL);
  const kept = await cache.match(request);
  if (kept) return kept;
  const answer = await fetch(request);
  if (answer.status === 200 && answer.type === "basic") await cache.put(request, answer.clone());
  return answer;
}

/** Files another app shared to Nubo: kept until the file browser uploads them, then opened. */
async function receiveShare(request) {
  const form = await request.formData();
  const files = form.getAll("files").filter((value) => typeof value !== "string");
  const cache = await caches.open(SHARED);
  let n = 0;
  for (const file of files) {
    const headers = { "content-type": file.type || "application/octet-stream", "x-nubo-name": encodeURIComponent(file.name) };
    await cache.put(`/shared/${Date.now()}-${n++}`, new Response(file, { headers }));
  }
  return Response.redirect(`/files?shared=${n}`, 303);
}
