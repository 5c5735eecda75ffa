//! How the file browser shows a folder (order, list or grid, properties panel), kept in
//! localStorage. The image viewer reads the order too, so previous and next follow the listing.
import type { Sort } from "./ops";

const KEY = "nubo.files.view";

export interface Prefs {
  sort: Sort;
  view: "list" | "grid";
  props: boolean;
}

export function loadPrefs(): Prefs {
  const fallback: Prefs = { sort: { key: "name", desc: false }, view: "list", props: false };
  try {
    return { ...fallback, ...JSON.parse(localStorage.getItem(KEY) ?? "{}") };
  } catch {
    return fallback;
  }
}

export function savePrefs(prefs: Prefs): void {
  localStorage.setItem(KEY, JSON.stringify(prefs));
}
