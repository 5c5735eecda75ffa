//! The signed-in user's profile and settings, loaded after sign-in: they choose the language
//! and the theme colours of the whole app.
import { api, client, type Schemas } from "./api/client";
import { i18n, pickLocale, type Locale } from "./i18n/index.svelte";
import { applyTheme } from "./theme";

class User {
  me = $state<Schemas["UserView"] | null>(null);
  settings = $state<Schemas["UserSettingsView"] | null>(null);

  async load(): Promise<void> {
    const [me, settings] = await Promise.all([
      api(() => client.GET("/api/v1/user/me")),
      api(() => client.GET("/api/v1/user/settings")),
    ]);
    this.me = me;
    this.settings = settings;
    if (!localStorage.getItem("nubo.lang")) i18n.locale = pickLocale(settings.language);
    applyTheme(settings.theme.colors);
  }

  /** Switches the language now and, when signed in, saves it as the user's setting. */
  async setLanguage(l: Locale): Promise<void> {
    i18n.locale = l;
    if (this.me) {
      await api(() =>
        client.PATCH("/api/v1/user/settings/{option}", {
          params: { path: { option: "language" } },
          body: { language: l === "en" ? "en-US" : l },
        }),
      ).catch(() => undefined);
    }
  }

  clear(): void {
    this.me = null;
    this.settings = null;
  }
}

export const user = new User();
