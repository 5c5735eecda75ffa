//! How the public share page talks to the API. Visitors' calls go through a client without the
//! session's bearer token: a share answers 401 `share.password_required` for a missing grant,
//! which the `api()` wrapper would take for an ended session and sign a user out. The grant a
//! correct password earns is kept per share in sessionStorage (it lives an hour on the server).
import createClient from "openapi-fetch";
import type { paths } from "../api/generated/schema";
import { ApiError, toApiError } from "../api/client";
import { t } from "../i18n/index.svelte";

// Path parameters keep their slashes (each segment encoded): a folder inside a share is named by
// its path, and the server refuses an encoded separator (`%2F`).
export const visitor = createClient<paths>({
  baseUrl: "",
  pathSerializer: (pathname, params) =>
    pathname.replace(/\{(\w+)\}/g, (m, name: string) => {
      const v = (params as Record<string, unknown> | undefined)?.[name];
      return v === undefined || v === null ? m : String(v).split("/").map(encodeURIComponent).join("/");
    }),
});

type Outcome = { data?: unknown; error?: unknown; response: Response };

/** Runs one visitor call; resolves to its data, throws ApiError (like `api()`, without the session). */
export async function visit<R extends Outcome>(run: () => Promise<R>): Promise<NonNullable<R["data"]>> {
  let out: Outcome;
  try {
    out = await run();
  } catch (e) {
    throw new ApiError(0, "http.network", String((e as Error)?.message ?? e));
  }
  if (out.error !== undefined || !out.response.ok) throw toApiError(out.response, out.error);
  return out.data as NonNullable<R["data"]>;
}

const key = (code: string) => `nubo.share-grant.${code}`;

export const grants = {
  get(code: string): string | null {
    return sessionStorage.getItem(key(code));
  },
  set(code: string, grant: string): void {
    sessionStorage.setItem(key(code), grant);
  },
  clear(code: string): void {
    sessionStorage.removeItem(key(code));
  },
  /** The header that carries a share's grant, or none. */
  headers(code: string): Record<string, string> {
    const g = this.get(code);
    return g ? { "X-Share-Grant": g } : {};
  },
};

/** Where visitors open a share in the app (the API's `url` is the JSON resource, not the page). */
export function shareLink(code: string): string {
  return `${location.origin}/share/${encodeURIComponent(code)}`;
}

/** A message for a share failure a visitor understands: gone, expired, used up, too many tries. */
export function shareErrorMessage(e: unknown): string {
  if (!(e instanceof ApiError)) return String((e as Error)?.message ?? e);
  if (e.status === 404) return t("share.errors.not_found");
  if (e.status === 410) {
    return e.code === "share.download_limit_reached" ? t("share.errors.exhausted") : t("share.errors.expired");
  }
  if (e.status === 429) return t("share.errors.too_many");
  if (e.code === "share.password_wrong") return t("share.errors.wrong_password");
  if (e.status === 0) return t("share.errors.network");
  return e.message;
}

/** Starts a browser download of a URL of ours (a single-use token URL). */
export function downloadUrl(url: string, name = ""): void {
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
}
