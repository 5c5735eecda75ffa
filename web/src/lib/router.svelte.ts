//! A tiny history-API router. The server answers index.html for every non-asset path, so any
//! URL can be opened directly; in-app links are plain <a href> that `navigate` intercepts.
export type Route =
  | { name: "login" }
  | { name: "oauth_login" }
  | { name: "register" }
  | { name: "magic_link" }
  | { name: "reset" }
  | { name: "verify" }
  | { name: "files"; path: string[] }
  | { name: "open"; id: string }
  | { name: "trash" }
  | { name: "share"; code: string }
  | { name: "shares" }
  | { name: "settings" }
  | { name: "admin"; section: string; id?: string; sub?: string }
  | { name: "not_found" };

/** Pages that need a session; the others are public. */
export const PUBLIC_ROUTES = new Set<Route["name"]>([
  "login",
  "oauth_login",
  "register",
  "magic_link",
  "reset",
  "verify",
  "share",
  "not_found",
]);

export function match(pathname: string): Route {
  const parts = pathname.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const [head, ...rest] = parts;
  switch (head) {
    case undefined:
    case "files":
      return { name: "files", path: rest };
    case "login":
      // `/login/magic?token=`: the link a sign-in mail carries.
      if (rest.length === 1 && rest[0] === "magic") return { name: "magic_link" };
      if (rest.length === 1 && rest[0] === "oauth") return { name: "oauth_login" };
      return rest.length ? { name: "not_found" } : { name: "login" };
    case "reset":
      return rest.length ? { name: "not_found" } : { name: "reset" };
    case "verify":
      return rest.length ? { name: "not_found" } : { name: "verify" };
    case "register":
      return rest.length ? { name: "not_found" } : { name: "register" };
    case "share":
      return rest.length === 1 ? { name: "share", code: rest[0] } : { name: "not_found" };
    case "shares":
      return rest.length ? { name: "not_found" } : { name: "shares" };
    case "open":
      return rest.length === 1 ? { name: "open", id: rest[0] } : { name: "not_found" };
    case "trash":
      return rest.length ? { name: "not_found" } : { name: "trash" };
    case "settings":
      return rest.length ? { name: "not_found" } : { name: "settings" };
    case "admin":
      if (rest.length <= 1) return { name: "admin", section: rest[0] ?? "" };
      // `/admin/users/<id>`: one user's detail.
      if (rest.length === 2 && rest[0] === "users") return { name: "admin", section: "users", id: rest[1] };
      // `/admin/settings/<page>`: one page of the site settings.
      if (rest.length === 2 && rest[0] === "settings") return { name: "admin", section: "settings", sub: rest[1] };
      return { name: "not_found" };
    default:
      return { name: "not_found" };
  }
}

/** The URL of a folder of the file browser, each segment encoded. */
export function filesHref(path: string[]): string {
  return "/files" + (path.length ? "/" + path.map(encodeURIComponent).join("/") : "");
}

class Router {
  url = $state(new URL(location.href));
  route = $derived(match(this.url.pathname));
  /** Asked before a link or the back button leaves the page: each answers whether to go (an
   * editor with unsaved changes asks the person). */
  readonly guards = new Set<() => boolean>();

  constructor() {
    window.addEventListener("popstate", () => {
      // The address has already changed: put it back when a guard keeps the person here.
      if (!this.mayLeave()) return history.pushState(null, "", this.url.href);
      this.url = new URL(location.href);
    });
    // Same-origin <a> clicks stay in the app (unless modified, targeted or a download).
    document.addEventListener("click", (e) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      const a = (e.target as Element | null)?.closest?.("a");
      if (!a || a.target || a.hasAttribute("download")) return;
      const to = new URL(a.href, location.href);
      if (to.origin !== location.origin || to.pathname.startsWith("/api/")) return;
      e.preventDefault();
      if (this.mayLeave()) this.navigate(to.pathname + to.search + to.hash);
    });
  }

  /** Whether every guard lets the person leave the page now. */
  mayLeave(): boolean {
    return [...this.guards].every((guard) => guard());
  }

  navigate(to: string, replace = false): void {
    if (replace) history.replaceState(null, "", to);
    else history.pushState(null, "", to);
    this.url = new URL(location.href);
    window.scrollTo(0, 0);
  }
}

export const router = new Router();
