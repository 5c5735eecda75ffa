//! The signed-in session: the access and refresh tokens (kept in localStorage so a reload stays
//! signed in), refresh-token rotation (ahead of expiry, or once after a 401), and sign-out.
//! It talks to the token endpoints with plain fetch so it never depends on the API wrapper.
import type { components } from "./api/generated/schema";
import { jwtClaims } from "./jwt";

type TokenPair = components["schemas"]["TokenPair"];
type GroupClaims = components["schemas"]["GroupClaims"];

const KEY = "nubo.session";
/** Refresh when the access token has less than this left. */
const AHEAD_MS = 60_000;

function load(): TokenPair | null {
  try {
    const raw = localStorage.getItem(KEY);
    return raw ? (JSON.parse(raw) as TokenPair) : null;
  } catch {
    return null;
  }
}

class Session {
  tokens = $state<TokenPair | null>(load());
  /** The group snapshot in the access token (admin flag, permissions). */
  group = $derived(jwtClaims<{ group?: GroupClaims }>(this.tokens?.access_token)?.group ?? null);
  signedIn = $derived(this.tokens !== null);
  #refreshing: Promise<boolean> | null = null;

  constructor() {
    // Another tab rotated or cleared the tokens: follow it, or our refresh token would be stale.
    window.addEventListener("storage", (e) => {
      if (e.key === KEY) this.tokens = load();
    });
  }

  get accessToken(): string | null {
    return this.tokens?.access_token ?? null;
  }
  get refreshToken(): string | null {
    return this.tokens?.refresh_token ?? null;
  }

  store(pair: TokenPair | null): void {
    this.tokens = pair
      ? {
          access_token: pair.access_token,
          access_expires: pair.access_expires,
          refresh_token: pair.refresh_token,
          refresh_expires: pair.refresh_expires,
        }
      : null;
    if (this.tokens) localStorage.setItem(KEY, JSON.stringify(this.tokens));
    else localStorage.removeItem(KEY);
  }

  /** Refreshes first when the access token is about to expire. */
  async ensureFresh(): Promise<void> {
    const t = this.tokens;
    if (t && Date.parse(t.access_expires) - Date.now() < AHEAD_MS) await this.refresh();
  }

  /** Exchanges the refresh token for a new pair; one exchange at a time. False: signed out. */
  refresh(): Promise<boolean> {
    this.#refreshing ??= this.#doRefresh().finally(() => (this.#refreshing = null));
    return this.#refreshing;
  }

  async #doRefresh(): Promise<boolean> {
    const before = this.accessToken;
    const stored = load();
    // Another tab may already have rotated: take its fresh pair instead of spending ours.
    if (stored && stored.access_token !== before && Date.parse(stored.access_expires) - Date.now() > AHEAD_MS) {
      this.tokens = stored;
      return true;
    }
    const refresh = stored?.refresh_token ?? this.refreshToken;
    if (!refresh) return false;
    try {
      const res = await fetch("/api/v1/user/session/refresh", {
        method: "POST",
        headers: { Authorization: `Bearer ${refresh}` },
      });
      if (!res.ok) {
        if (res.status === 401 || res.status === 403) this.expired();
        return false;
      }
      this.store((await res.json()) as TokenPair);
      return true;
    } catch {
      return false;
    }
  }

  /** The session is no longer valid: forget it (the router then shows the sign-in page). */
  expired(): void {
    this.store(null);
  }

  /** Signs out: revokes the refresh token on the server (best effort) and forgets the pair. */
  async signOut(): Promise<void> {
    const refresh = this.refreshToken;
    this.store(null);
    if (refresh) {
      await fetch("/api/v1/user/session", {
        method: "DELETE",
        headers: { Authorization: `Bearer ${refresh}` },
      }).catch(() => undefined);
    }
  }
}

export const session = new Session();
