//! The administration's map: its areas in the groups the side navigation shows, the URL of each,
//! and the site settings' own pages (which groups of `GET /admin/settings/catalog` each shows).
//! Kept apart from the screens so pages/Admin.svelte can name the window without loading them.
import type { MessageKey } from "../i18n/index.svelte";

/** The navigation's groups, in order, each with its areas (`admin.sections.<area>`). */
export const NAV_GROUPS = [
  { group: "overview", areas: ["summary"] },
  { group: "people", areas: ["users", "groups"] },
  { group: "storage", areas: ["policies", "nodes", "packs", "files"] },
  { group: "sharing", areas: ["shares", "reports", "redeem"] },
  { group: "look", areas: ["themes", "viewers"] },
  { group: "system", areas: ["tasks", "activity", "settings"] },
] as const;

export type Area = (typeof NAV_GROUPS)[number]["areas"][number];
export const AREAS: readonly string[] = NAV_GROUPS.flatMap((g) => g.areas);

/** A page of the site settings: `slug` in its URL, `key` under `admin.settings_pages`, and the
 * catalog groups it shows. Mail has its own form (MailSettingsAdmin); the viewers' group is
 * edited on the Viewers screen. */
export type SettingsPage = { slug: string; key: string; groups: readonly string[] };
export const SETTINGS_PAGES: readonly SettingsPage[] = [
  { slug: "site", key: "site", groups: ["BASIC"] },
  { slug: "sign-in", key: "sign_in", groups: ["LOGIN", "REGISTER"] },
  { slug: "oauth", key: "oauth", groups: ["OAUTH"] },
  { slug: "captcha", key: "captcha", groups: ["CAPTCHA"] },
  { slug: "mail", key: "mail", groups: ["MAIL"] },
];
/** Groups edited elsewhere, never on a settings page of their own. */
export const SETTINGS_ELSEWHERE = new Set(["VIEWER"]);

/** The page of a catalog group the list above does not know (one the server added later): its
 * slug is the group's name in lower case, its title the group's (`admin.settings_form.group`). */
export function settingsPageOf(slug: string): SettingsPage | null {
  const known = SETTINGS_PAGES.find((p) => p.slug === slug);
  if (known) return known;
  if (!/^[a-z_]+$/.test(slug) || SETTINGS_PAGES.some((p) => p.groups.includes(slug.toUpperCase()))) return null;
  const group = slug.toUpperCase();
  return SETTINGS_ELSEWHERE.has(group) ? null : { slug, key: "", groups: [group] };
}

/** A settings page's human title. */
export function settingsTitle(page: SettingsPage, t: (key: MessageKey) => string): string {
  if (page.key) return t(`admin.settings_pages.${page.key}.title` as MessageKey);
  const key = `admin.settings_form.group.${page.groups[0]}`;
  const text = t(key as MessageKey);
  return text === key ? page.groups[0] : text;
}

export function areaHref(area: string): string {
  return area === "summary" ? "/admin" : `/admin/${area}`;
}

export function settingsHref(slug: string): string {
  return `/admin/settings/${encodeURIComponent(slug)}`;
}

/** What `/admin/<section>[/<sub>]` shows: the area (`summary` for `/admin`) and, for the
 * settings, its page; null when there is no such page. */
export function resolve(section: string, sub?: string): { area: Area; settings?: SettingsPage } | null {
  const area = section === "" ? "summary" : section;
  if (!AREAS.includes(area)) return null;
  if (area !== "settings" || sub === undefined) return { area: area as Area };
  const settings = settingsPageOf(sub);
  return settings ? { area: "settings", settings } : null;
}
