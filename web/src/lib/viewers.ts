//! What the viewer page needs from the API: the viewers of an extension (the browser's cache
//! keeps them and revalidates with the server's ETag), a file's bytes through a single-use
//! download URL, a reusable media URL for players, saving text back through `PATCH
//! /file/content`, WOPI sessions, and which code grammar an extension names.
import { api, client, type ObjectView, type Schemas } from "./api/client";
import { t } from "./i18n/index.svelte";

export type Viewer = Schemas["Viewer"];

/** The extension of a file name, lower case without the dot; empty when it has none. */
export function extensionOf(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

/** The highlight.js grammar for code files of extension `ext` (lib/highlight.ts has them all),
 * or null for plain text. Here, not there, so the viewer knows without loading the highlighter. */
export function grammarOf(ext: string): string | null {
  return Object.hasOwn(BY_EXTENSION, ext) ? BY_EXTENSION[ext] : null;
}

const BY_EXTENSION: Record<string, string> = {
  rs: "rust", ts: "typescript", tsx: "typescript", mts: "typescript", cts: "typescript",
  js: "javascript", jsx: "javascript", mjs: "javascript", cjs: "javascript",
  py: "python", go: "go", java: "java", kt: "kotlin", kts: "kotlin",
  c: "c", h: "c", cpp: "cpp", cc: "cpp", cxx: "cpp", hpp: "cpp", hh: "cpp", cs: "csharp",
  sh: "bash", bash: "bash", zsh: "bash", json: "json", yaml: "yaml", yml: "yaml",
  toml: "ini", ini: "ini", conf: "ini", html: "xml", htm: "xml", xml: "xml", svg: "xml", svelte: "xml",
  css: "css", scss: "scss", sql: "sql", md: "markdown", markdown: "markdown",
  rb: "ruby", php: "php", lua: "lua", swift: "swift", diff: "diff", patch: "diff",
};

/** The ways to open files of `ext` (none for a name without an extension). */
export async function viewersOf(ext: string): Promise<Viewer[]> {
  if (!/^[a-z0-9]{1,16}$/.test(ext)) return [];
  const answer = await api(() => client.GET("/api/v1/file/viewers", { params: { query: { ext } } }));
  return answer.viewers;
}

/** A single-use URL of the file's bytes (for one <img>, <video> or fetch). */
export async function contentUrl(o: ObjectView): Promise<string> {
  return (await api(() => client.POST("/api/v1/file/download/{id}", { params: { path: { id: o.id } } }))).url;
}

/**
 * A reusable media URL of the file's content for a <video> or <audio> player: it serves every
 * ranged request the player makes while it seeks, for a few hours.
 */
export async function mediaUrl(o: ObjectView): Promise<string> {
  return (await api(() => client.POST("/api/v1/file/media/{id}", { params: { path: { id: o.id } } }))).url;
}

/** Why a <video> or <audio> stopped (its `error` event), in words that say what to do next. */
export function playbackProblem(e: Event): string {
  const code = (e.currentTarget as HTMLMediaElement).error?.code;
  if (code === MediaError.MEDIA_ERR_SRC_NOT_SUPPORTED) return t("viewer.playback.unsupported");
  if (code === MediaError.MEDIA_ERR_DECODE) return t("viewer.playback.decode");
  return t("viewer.playback.network");
}

/** The file's bytes as a Blob of `type` (the PDF viewer frames it; text is read from it). */
export async function fetchContent(o: ObjectView, type: string): Promise<Blob> {
  const response = await fetch(await contentUrl(o));
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  return new Blob([await response.arrayBuffer()], { type });
}

/** Replaces the file's content with `text`; answers the file with its new size. */
export async function saveText(o: ObjectView, text: string): Promise<ObjectView> {
  return api(() =>
    client.PATCH("/api/v1/file/content", {
      params: { query: { id: o.id } },
      // The text itself is the body, not JSON.
      body: new Blob([text], { type: "application/octet-stream" }) as unknown as number[],
      bodySerializer: (body: unknown) => body as Blob,
      headers: { "Content-Type": "application/octet-stream" },
    }),
  );
}

/** Opens a WOPI session for the file with an application. */
export async function wopiSession(o: ObjectView, appId: string, edit: boolean): Promise<Schemas["WopiSession"]> {
  return api(() =>
    client.POST("/api/v1/file/{id}/wopi_session", {
      params: { path: { id: o.id } },
      body: { app_id: appId, mode: edit ? "edit" : "view" },
    }),
  );
}
