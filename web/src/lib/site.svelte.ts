//! The public site configuration (`GET /site/config`), read once before sign-in: which sign-in
//! methods are enabled, whether registration is open, the site name.
import { api, client, type Schemas } from "./api/client";

class Site {
  config = $state<Schemas["SiteConfigResponse"] | null>(null);
  error = $state<string | null>(null);
  #loading: Promise<void> | null = null;

  load(): Promise<void> {
    this.#loading ??= api(() => client.GET("/api/v1/site/config"))
      .then((c) => {
        // The window's title follows through PageTitle, which every page has (setting
        // `document.title` here would overwrite the page's name on a direct load).
        this.config = c;
      })
      .catch((e: Error) => {
        this.error = e.message;
        this.#loading = null;
      });
    return this.#loading;
  }
}

export const site = new Site();
