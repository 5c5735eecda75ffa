//! OAuth providers in the app: which the site enables, where a sign-in starts (a full browser
//! navigation to the API, which redirects to the provider), what a provider is called (the
//! OpenID Connect one by the site's `oidc_display_name`), and the message for an
//! `oauth_error` code the callback redirected with.
import { t, type MessageKey } from "./i18n/index.svelte";
import { site } from "./site.svelte";

export const OAUTH_PROVIDERS = ["github", "qq", "oidc"] as const;
export type OAuthProvider = (typeof OAUTH_PROVIDERS)[number];

export function enabledProviders(methods: readonly string[] | undefined): OAuthProvider[] {
  return OAUTH_PROVIDERS.filter((p) => methods?.includes(p));
}

export function providerName(provider: string): string {
  if (provider === "oidc" && site.config?.oidc_display_name?.trim()) return site.config.oidc_display_name.trim();
  const key = `oauth.providers.${provider}` as MessageKey;
  const name = t(key);
  return name === key ? provider : name;
}

export function signInUrl(provider: OAuthProvider): string {
  return `/api/v1/user/oauth/${provider}`;
}

/** The message for a stable error code of the OAuth flow (`auth.oauth_no_email` …); `fallback`
 *  (or a generic message) for another code. */
export function oauthErrorMessage(code: string, fallback?: string): string {
  const key = `oauth.errors.${code.replace(/\./g, "_")}` as MessageKey;
  const message = t(key);
  return message === key ? (fallback ?? t("oauth.errors.generic")) : message;
}
