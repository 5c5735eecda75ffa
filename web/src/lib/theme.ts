//! Applies a theme (one hue per role, one neutral tone) as CSS variables on <html>, through the
//! CSSOM (allowed by the CSP, unlike style attributes). Each role gets a light-mode and a
//! dark-mode shade; app.css picks one with light-dark() by the page's color-scheme. A role whose colour is missing
//! or unknown falls back to the site's default preset, then to the built-in default.
import type { components } from "./api/generated/schema";

export type ThemeColors = components["schemas"]["ThemeColors"];
export type ThemePreset = components["schemas"]["ThemePresetView"];
export const ROLES = ["primary", "secondary", "success", "info", "warning", "error"] as const;

/** The built-in default (the server's too): blue on slate. app.css starts with these values. */
export const BUILT_IN: ThemeColors = {
  primary: "blue", secondary: "violet", success: "green", info: "sky", warning: "amber", error: "red", neutral: "slate",
};

// [shade for light backgrounds (600), shade for dark backgrounds (400)], Tailwind's palette.
const HUES: Record<string, [string, string]> = {
  red: ["#dc2626", "#f87171"], orange: ["#ea580c", "#fb923c"], amber: ["#d97706", "#fbbf24"],
  yellow: ["#ca8a04", "#facc15"], lime: ["#65a30d", "#a3e635"], green: ["#16a34a", "#4ade80"],
  emerald: ["#059669", "#34d399"], teal: ["#0d9488", "#2dd4bf"], cyan: ["#0891b2", "#22d3ee"],
  sky: ["#0284c7", "#38bdf8"], blue: ["#2563eb", "#60a5fa"], indigo: ["#4f46e5", "#818cf8"],
  violet: ["#7c3aed", "#a78bfa"], purple: ["#9333ea", "#c084fc"], fuchsia: ["#c026d3", "#e879f9"],
  pink: ["#db2777", "#f472b6"], rose: ["#e11d48", "#fb7185"],
};
// Shades 50, 100, 200, 500, 700, 800, 900, 950.
const STEPS = [50, 100, 200, 500, 700, 800, 900, 950];
const NEUTRALS: Record<string, string[]> = {
  slate: ["#f8fafc", "#f1f5f9", "#e2e8f0", "#64748b", "#334155", "#1e293b", "#0f172a", "#020617"],
  gray: ["#f9fafb", "#f3f4f6", "#e5e7eb", "#6b7280", "#374151", "#1f2937", "#111827", "#030712"],
  zinc: ["#fafafa", "#f4f4f5", "#e4e4e7", "#71717a", "#3f3f46", "#27272a", "#18181b", "#09090b"],
  neutral: ["#fafafa", "#f5f5f5", "#e5e5e5", "#737373", "#404040", "#262626", "#171717", "#0a0a0a"],
  stone: ["#fafaf9", "#f5f5f4", "#e7e5e4", "#78716c", "#44403c", "#292524", "#1c1917", "#0c0a09"],
};

export const CHROMATIC = Object.keys(HUES) as ThemeColors["primary"][];
export const NEUTRAL = Object.keys(NEUTRALS) as ThemeColors["neutral"][];

/** A colour's swatch (its light-mode shade; the middle grey of a neutral tone). */
export function swatch(colour: string): string {
  return HUES[colour]?.[0] ?? NEUTRALS[colour]?.[3] ?? "transparent";
}

let siteDefault: ThemeColors | null = null;
let presets: Promise<ThemePreset[]> | null = null;

/** The site's theme presets (`GET /site/themes`, public), fetched once; the default one becomes
 *  the fallback of `applyTheme`. */
export function loadPresets(): Promise<ThemePreset[]> {
  presets ??= fetch("/api/v1/site/themes")
    .then((r) => (r.ok ? (r.json() as Promise<ThemePreset[]>) : []))
    .catch(() => [])
    .then((list) => {
      siteDefault = list.find((p) => p.is_default)?.colors ?? null;
      return list;
    });
  return presets;
}

/** Applies the site's default preset (visitors without an account), else the built-in default. */
export async function applySiteDefaultTheme(): Promise<void> {
  await loadPresets();
  applyTheme(siteDefault ?? BUILT_IN);
}

export function applyTheme(colors: Partial<ThemeColors>): void {
  const s = document.documentElement.style;
  const pick = <K extends keyof ThemeColors>(role: K, known: Record<string, unknown>): string => {
    for (const c of [colors[role], siteDefault?.[role], BUILT_IN[role]]) if (c && c in known) return c;
    return BUILT_IN[role];
  };
  for (const role of ROLES) {
    const hue = HUES[pick(role, HUES)];
    s.setProperty(`--${role}-light`, hue[0]);
    s.setProperty(`--${role}-dark`, hue[1]);
  }
  const n = NEUTRALS[pick("neutral", NEUTRALS)];
  STEPS.forEach((step, i) => s.setProperty(`--n-${step}`, n[i]));
}
