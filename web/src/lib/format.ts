//! Formatting of sizes and dates for display, in the current language.
import { i18n } from "./i18n/index.svelte";

/** Binary multiples, so named (IEC): 1 KiB is 1,024 bytes, as the computation is. */
const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

export function formatBytes(n: number): string {
  let v = n;
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${UNITS[u]}`;
}

// One formatter per language: toLocaleString builds a new one per call (~0.25 ms each), which
// a virtualised list scrolling 14 new rows a frame cannot afford.
const dateFormats = new Map<string, Intl.DateTimeFormat>();

// And the strings made: format() itself was the app's costliest function of a scroll bar drag,
// which makes every row anew each frame; forgotten wholesale past a size few folders reach.
const formatted = new Map<string, string>();
let formattedIn = "";

export function formatDate(iso: string): string {
  const locale = i18n.locale;
  if (locale !== formattedIn || formatted.size > 50_000) {
    formatted.clear();
    formattedIn = locale;
  }
  const known = formatted.get(iso);
  if (known !== undefined) return known;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  let f = dateFormats.get(locale);
  if (!f) {
    f = new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "short" });
    dateFormats.set(locale, f);
  }
  const text = f.format(d);
  formatted.set(iso, text);
  return text;
}

const preciseFormats = new Map<string, Intl.DateTimeFormat>();

/** A date with seconds, for lists whose entries can be minutes apart (a file's versions). */
export function formatDateSeconds(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  let f = preciseFormats.get(i18n.locale);
  if (!f) {
    f = new Intl.DateTimeFormat(i18n.locale, { dateStyle: "medium", timeStyle: "medium" });
    preciseFormats.set(i18n.locale, f);
  }
  return f.format(d);
}
