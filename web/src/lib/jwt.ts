//! Reads the claims of our own JWTs (no verification: the server does that); used only to show
//! or hide parts of the UI, such as the administration link.
export function jwtClaims<T = Record<string, unknown>>(token: string | null | undefined): T | null {
  if (!token) return null;
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = decodeURIComponent(
      Array.from(atob(part), (c) => "%" + c.charCodeAt(0).toString(16).padStart(2, "0")).join(""),
    );
    return JSON.parse(json) as T;
  } catch {
    return null;
  }
}
