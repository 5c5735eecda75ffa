//! The share options form as plain values (password, expiry day, download limit, preview) and
//! their translation to the API's `NewShare` (create) and `ShareChanges` (edit: absent stays,
//! null removes).
import type { Schemas } from "../api/client";

export type ShareFields = {
  /** Whether visitors need a password. */
  protect: boolean;
  /** A new password; blank while editing keeps the current one. */
  password: string;
  /** `YYYY-MM-DD` (the share ends at the end of that local day) or blank for never. */
  expires: string;
  /** A positive whole number or blank for no limit. */
  maxDownloads: string;
  allowPreview: boolean;
};

export function emptyFields(): ShareFields {
  return { protect: false, password: "", expires: "", maxDownloads: "", allowPreview: true };
}

export function fieldsOf(s: Schemas["ShareView"]): ShareFields {
  return {
    protect: s.password_protected,
    password: "",
    expires: s.expires_at ? localDay(new Date(s.expires_at)) : "",
    maxDownloads: s.max_downloads ? String(s.max_downloads) : "",
    allowPreview: s.allow_preview,
  };
}

/** Today as `YYYY-MM-DD` in local time (the earliest expiry a date input offers). */
export function localDay(d = new Date()): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

function expiry(day: string): string | null {
  if (!day) return null;
  const d = new Date(`${day}T23:59:59`);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

function limit(n: string): number | null {
  const v = Number.parseInt(n, 10);
  return Number.isFinite(v) && v > 0 ? v : null;
}

export function toNewShare(objectId: string, f: ShareFields): Schemas["NewShare"] {
  return {
    object_id: objectId,
    password: f.protect && f.password ? f.password : null,
    expires_at: expiry(f.expires),
    max_downloads: limit(f.maxDownloads),
    allow_preview: f.allowPreview,
  };
}

export function toChanges(f: ShareFields, was: Schemas["ShareView"]): Schemas["ShareChanges"] {
  const c: Schemas["ShareChanges"] = {
    expires_at: expiry(f.expires),
    max_downloads: limit(f.maxDownloads),
    allow_preview: f.allowPreview,
  };
  if (!f.protect && was.password_protected) c.password = null;
  else if (f.protect && f.password) c.password = f.password;
  return c;
}

/** A reason the fields cannot be sent, as a message key, or null. */
export function invalid(f: ShareFields, hadPassword: boolean): "share.form.password_short" | null {
  if (f.protect && (f.password || !hadPassword) && f.password.length < 4) return "share.form.password_short";
  return null;
}
