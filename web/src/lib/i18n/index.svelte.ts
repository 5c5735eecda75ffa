//! Messages in English and Simplified Chinese. `t("files.new_folder", { name })` looks a key up
//! in the current language (falling back to English) and fills `{name}` placeholders. A message
//! that depends on a number is an object of the language's plural forms (`{"one": ..., "other":
//! ...}`), picked by `Intl.PluralRules` for the `count` parameter. The language comes from the
//! user's setting once signed in, else from the browser.
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

/** A message's plural forms, by `Intl.PluralRules` category; `other` is always there. */
type Plural = { other: string } & Partial<Record<Intl.LDMLPluralRule, string>>;

const pluralRules = new Map<Locale, Intl.PluralRules>();

function lookup(catalog: Record<string, unknown>, key: string, count: unknown): string | undefined {
  let v: unknown = catalog;
  for (const part of key.split(".")) v = (v as Record<string, unknown> | undefined)?.[part];
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as Plural).other === "string") {
    const forms = v as Plural;
    if (typeof count !== "number") return forms.other;
    let rules = pluralRules.get(current);
    if (!rules) pluralRules.set(current, (rules = new Intl.PluralRules(current)));
    return forms[rules.select(count)] ?? forms.other;
  }
  return undefined;
}

// Dotted keys of the English catalog, so a typo in a key is a type error; plural forms are one key.
type Leaves<T, P extends string = ""> = {
  [K in keyof T & string]: T[K] extends string
    ? `${P}${K}`
    : T[K] extends { other: string }
      ? `${P}${K}`
      : Leaves<T[K], `${P}${K}.`>;
}[keyof T & string];
export type MessageKey = Leaves<Messages>;

/**
 * What to show for an API error: the translation of its stable code (for an invalid field, of
 * the field's rule when there is one), else the server's own text.
 */
export function describeError(code: string, field: string | null | undefined, fallback: string): string {
  const find = (key: string) => lookup(CATALOGS[current], key, undefined) ?? lookup(en, key, undefined);
  return (code === "request.invalid_field" && field ? find(`error_fields.${field}`) : undefined) ?? find(`errors.${code}`) ?? fallback;
}

export function t(key: MessageKey, params?: Record<string, string | number>): string {
  const count = params?.count;
  const s = lookup(CATALOGS[current], key, count) ?? lookup(en, key, count) ?? key;
  return params ? s.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m)) : s;
}
