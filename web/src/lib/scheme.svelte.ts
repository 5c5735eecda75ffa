//! Light or dark: `auto` follows the system (app.css's light-dark() under `color-scheme: light dark`), `light` and `dark`
//! are the person's choice, kept in this browser and set as `data-scheme` on <html>.
export type Scheme = "auto" | "light" | "dark";
export const SCHEMES: Scheme[] = ["auto", "light", "dark"];

const KEY = "nubo.scheme";

function apply(scheme: Scheme): void {
  if (scheme === "auto") delete document.documentElement.dataset.scheme;
  else document.documentElement.dataset.scheme = scheme;
}

function stored(): Scheme {
  const value = localStorage.getItem(KEY);
  return value === "light" || value === "dark" ? value : "auto";
}

let current = $state<Scheme>(stored());
apply(current);

export const scheme = {
  get value(): Scheme {
    return current;
  },
  set value(next: Scheme) {
    current = next;
    if (next === "auto") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, next);
    apply(next);
  },
};
