//! Messages in English and Simplified Chinese. `t("files.new_folder", { name })` looks a key up
//! in the current language (falling back to English) and fills `{name}` placeholders. The
//! language comes from the user's setting once signed in, else from the browser.
import en from "./en.json";
import zhCN from "./zh-CN.json";

type Messages = typeof en;
export type Locale = "en" | "zh-CN";
export const LOCALES: Locale[] = ["en", "zh-CN"];
const CATALOGS: Record<Locale, Record<string, unknown>> = { en, "zh-CN": zhCN };

/** Maps a BCP 47 tag ("zh", "zh-Hans-CN", "en-US") to a supported locale. */
export function pickLocale(tag: string | null | undefined): Locale {
  const t = (tag ?? "").toLowerCase();
  return t.startsWith("zh") ? "zh-CN" : "en";
}

let current = $state<Locale>(pickLocale(localStorage.getItem("nubo.lang") ?? navigator.language));

export const i18n = {
  get locale(): Locale {
    return current;
  },
  set locale(l: Locale) {
    current = l;
    localStorage.setItem("nubo.lang", l);
    document.documentElement.lang = l;
  },
};
document.documentElement.lang = i18n.locale;

function lookup(catalog: Record<string, unknown>, key: string): string | undefined {
  let v: unknown = catalog;
  for (const part of key.split(".")) v = (v as Record<string, unknown> | undefined)?.[part];
  return typeof v === "string" ? v : undefined;
}

// Dotted keys of the English catalog, so a typo in a key is a type error.
type Leaves<T, P extends string = ""> = {
  [K in keyof T & string]: T[K] extends string ? `${P}${K}` : Leaves<T[K], `${P}${K}.`>;
}[keyof T & string];
export type MessageKey = Leaves<Messages>;

export function t(key: MessageKey, params?: Record<string, string | number>): string {
  const s = lookup(CATALOGS[current], key) ?? lookup(en, key) ?? key;
  return params ? s.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m)) : s;
}
