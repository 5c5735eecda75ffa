//! The signed-in user's profile and settings, loaded after sign-in: they choose the language
//! and the theme colours of the whole app.
import { api, client, type Schemas } from "./api/client";
import { i18n, pickLocale, type Locale } from "./i18n/index.svelte";
import { applyTheme } from "./theme";

/** Whether the last settings loaded in this browser said the password was generated. */
const GENERATED_KEY = "nubo.password-generated";

class User {
  me = $state<Schemas["UserView"] | null>(null);
  settings = $state<Schemas["UserSettingsView"] | null>(null);
  #generated = $state(localStorage.getItem(GENERATED_KEY) === "1");

  /**
   * The shell asks to change a generated password: as the settings say, and until they load, as
   * the last load said, so the request is there at first paint instead of pushing the page down
   * when the settings arrive (a layout shift of 0.13 on a phone).
   */
  get passwordGenerated(): boolean {
    return this.settings?.password_generated ?? this.#generated;
  }
  /** The password is one the user chose now. */
  passwordChosen(): void {
    if (this.settings) this.settings.password_generated = false;
    this.#remember(false);
  }
  #remember(generated: boolean): void {
    this.#generated = generated;
    if (generated) localStorage.setItem(GENERATED_KEY, "1");
    else localStorage.removeItem(GENERATED_KEY);
  }

  async load(): Promise<void> {
    const [me, settings] = await Promise.all([
      api(() => client.GET("/api/v1/user/me")),
      api(() => client.GET("/api/v1/user/settings")),
    ]);
    this.me = me;
    this.settings = settings;
    this.#remember(settings.password_generated);
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
    this.#remember(false);
  }
}

export const user = new User();
