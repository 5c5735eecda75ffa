//! The site settings as one typed value: every known setting's stored text (or its default)
//! parsed once, so the use cases read fields instead of looking names up.

use std::collections::HashMap;

use crate::domain::captcha::{CaptchaProvider, CaptchaScene};
use crate::domain::ids::GroupId;
use crate::domain::settings::{AuthMethod, known_setting, parse_group_map};

/// Every known setting, typed. Built by [`SiteSettings::from_stored`] from the `settings` rows.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteSettings {
    pub site_name: String,
    pub footer_code: String,
    pub tos_url: String,
    pub privacy_url: String,
    /// Where the site is reached from outside; empty: links are site paths.
    pub site_url: String,
    /// The public avatar service's URL template (`{hash}`, `{size}`).
    pub avatar_gravatar_url: String,
    pub activity_retention_days: u32,
    pub events_retention_days: u32,
    pub auth_methods: Vec<AuthMethod>,
    pub register_enabled: bool,
    /// The group registrations join; `None`: the seeded users' group.
    pub register_default_group: Option<GroupId>,
    pub register_email_verification: bool,
    pub mail: MailSettings,
    pub github: OAuthClient,
    pub qq: OAuthClient,
    pub oidc: OidcClient,
    pub captcha: CaptchaSettings,
    /// The built-in viewers as stored (`domain::viewer::stored_viewers` reads them).
    pub viewers: String,
}

/// The `MAIL` settings: how the master reaches its SMTP server, and the sender.
#[derive(Debug, Clone, PartialEq)]
pub struct MailSettings {
    /// Trimmed; empty: no mail is sent.
    pub host: String,
    pub port: u16,
    pub tls: TlsMode,
    pub user: String,
    pub password: String,
    /// Trimmed; `address` or `Name <address>`.
    pub from: String,
}

/// How the connection to the SMTP server is secured (`mail_smtp_tls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain text: only for a relay on a trusted network (or a test sink).
    None,
    /// Plain connection upgraded with STARTTLS, which the server must offer (port 587).
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
}

/// The site's client at an OAuth provider (GitHub, QQ) and the provider's endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_secret: String,
    pub authorize_url: String,
    pub token_url: String,
    pub api_url: String,
}

/// The OpenID Connect provider's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct OidcClient {
    /// The sign-in button's label.
    pub display_name: String,
    pub issuer: String,
    /// The issuer may be on a private address.
    pub internal: bool,
    pub client_id: String,
    pub client_secret: String,
    /// Space-separated.
    pub scopes: String,
    /// Trimmed; empty: no claim maps to groups.
    pub group_claim: String,
    /// A claim's value and the group it puts a user in; a stored map that no longer parses
    /// maps nothing (writes are checked).
    pub group_map: Vec<(String, GroupId)>,
}

/// Each scene's captcha provider and the sites' keys at the third-party providers.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptchaSettings {
    /// One entry per scene, in the order of [`CaptchaScene::ALL`].
    pub scenes: Vec<(CaptchaScene, CaptchaProvider)>,
    pub recaptcha: CaptchaKeys,
    pub turnstile: CaptchaKeys,
}

/// A third-party captcha provider's keys and where its answers are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptchaKeys {
    pub site_key: String,
    pub secret: String,
    pub verify_url: String,
}

impl CaptchaSettings {
    /// The provider guarding `scene`.
    pub fn provider(&self, scene: CaptchaScene) -> CaptchaProvider {
        self.scenes.iter().find(|(s, _)| *s == scene).map_or(CaptchaProvider::None, |(_, p)| *p)
    }

    /// The keys of a third-party provider; `None` for `none` and the built-in image.
    pub fn keys(&self, provider: CaptchaProvider) -> Option<&CaptchaKeys> {
        match provider {
            CaptchaProvider::Recaptcha => Some(&self.recaptcha),
            CaptchaProvider::Turnstile => Some(&self.turnstile),
            CaptchaProvider::None | CaptchaProvider::Builtin => None,
        }
    }
}

impl SiteSettings {
    /// The settings from the stored `(name, value)` rows; a setting without a row takes its
    /// default, a number that does not parse its default too (writes are validated). Fails only
    /// when `auth_methods` cannot be read: which sign-in methods are open is not guessed.
    pub fn from_stored(stored: &HashMap<String, String>) -> Result<Self, String> {
        Self::read(&mut Reader { stored, read: Vec::new() })
    }

    fn read(values: &mut Reader<'_>) -> Result<Self, String> {
        let auth_methods = serde_json::from_str(&values.text("auth_methods"))
            .map_err(|e| format!("stored auth_methods is not valid: {e}"))?;
        let oauth = |values: &mut Reader<'_>, names: [&'static str; 5]| OAuthClient {
            client_id: values.text(names[0]),
            client_secret: values.text(names[1]),
            authorize_url: values.text(names[2]),
            token_url: values.text(names[3]),
            api_url: values.text(names[4]),
        };
        let github = oauth(
            values,
            ["github_client_id", "github_client_secret", "github_authorize_url", "github_token_url", "github_api_url"],
        );
        let qq = oauth(values, ["qq_client_id", "qq_client_secret", "qq_authorize_url", "qq_token_url", "qq_api_url"]);
        let keys = |values: &mut Reader<'_>, names: [&'static str; 3]| CaptchaKeys {
            site_key: values.text(names[0]),
            secret: values.text(names[1]),
            verify_url: values.text(names[2]),
        };
        let recaptcha =
            keys(values, ["captcha_recaptcha_site_key", "captcha_recaptcha_secret", "captcha_recaptcha_verify_url"]);
        let turnstile =
            keys(values, ["captcha_turnstile_site_key", "captcha_turnstile_secret", "captcha_turnstile_verify_url"]);
        let scenes = CaptchaScene::ALL
            .iter()
            .map(|&scene| (scene, CaptchaProvider::parse(&values.text(scene.setting()))))
            .collect();
        Ok(SiteSettings {
            site_name: values.text("site_name"),
            footer_code: values.text("footer_code"),
            tos_url: values.text("tos_url"),
            privacy_url: values.text("privacy_url"),
            site_url: values.text("site_url"),
            avatar_gravatar_url: values.text("avatar_gravatar_url"),
            activity_retention_days: values.number("activity_retention_days"),
            events_retention_days: values.number("events_retention_days"),
            auth_methods,
            register_enabled: values.flag("register_enabled"),
            register_default_group: values.text("register_default_group").parse().ok(),
            register_email_verification: values.flag("register_email_verification"),
            mail: MailSettings {
                host: values.text("mail_smtp_host").trim().to_owned(),
                port: values.number("mail_smtp_port"),
                tls: match values.text("mail_smtp_tls").as_str() {
                    "none" => TlsMode::None,
                    "tls" => TlsMode::Tls,
                    _ => TlsMode::Starttls,
                },
                user: values.text("mail_smtp_user"),
                password: values.text("mail_smtp_password"),
                from: values.text("mail_from").trim().to_owned(),
            },
            github,
            qq,
            oidc: OidcClient {
                display_name: values.text("oidc_display_name"),
                issuer: values.text("oidc_issuer"),
                internal: values.flag("oidc_internal"),
                client_id: values.text("oidc_client_id"),
                client_secret: values.text("oidc_client_secret"),
                scopes: values.text("oidc_scopes"),
                group_claim: values.text("oidc_group_claim").trim().to_owned(),
                group_map: parse_group_map(&values.text("oidc_group_map"))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(value, group)| (value, GroupId::from(group)))
                    .collect(),
            },
            captcha: CaptchaSettings { scenes, recaptcha, turnstile },
            viewers: values.text("viewers"),
        })
    }
}

/// The stored texts, each read by name: the stored value, else the known default. Keeps the
/// names it was asked for, so a test can hold them against the known settings.
struct Reader<'a> {
    stored: &'a HashMap<String, String>,
    read: Vec<&'static str>,
}

impl Reader<'_> {
    fn default_of(name: &str) -> &'static str {
        known_setting(name).map_or("", |setting| setting.default)
    }

    fn text(&mut self, name: &'static str) -> String {
        self.read.push(name);
        self.stored.get(name).cloned().unwrap_or_else(|| Self::default_of(name).to_owned())
    }

    fn flag(&mut self, name: &'static str) -> bool {
        self.text(name) == "true"
    }

    /// The stored number, else the default's (which the tests hold to be a number).
    fn number<T: std::str::FromStr + Default>(&mut self, name: &'static str) -> T {
        let text = self.text(name);
        text.trim().parse().or_else(|_| Self::default_of(name).parse()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::settings::KNOWN_SETTINGS;

    fn stored(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect()
    }

    #[test]
    fn every_known_setting_is_read_once_and_nothing_else() {
        let empty = HashMap::new();
        let mut reader = Reader { stored: &empty, read: Vec::new() };
        SiteSettings::read(&mut reader).unwrap();
        let mut read = reader.read.clone();
        read.sort_unstable();
        let mut known: Vec<&str> = KNOWN_SETTINGS.iter().map(|s| s.name).collect();
        known.sort_unstable();
        assert_eq!(read, known);
    }

    #[test]
    fn defaults_apply_without_rows() {
        let settings = SiteSettings::from_stored(&HashMap::new()).unwrap();
        assert_eq!(settings.site_name, "Nubo");
        assert_eq!(settings.auth_methods, vec![AuthMethod::EmailPassword]);
        assert!(settings.register_enabled);
        assert_eq!(settings.register_default_group, None);
        assert_eq!((settings.activity_retention_days, settings.events_retention_days), (90, 7));
        assert_eq!((settings.mail.port, settings.mail.tls), (587, TlsMode::Starttls));
        assert_eq!(settings.github.api_url, "https://api.github.com");
        assert!(settings.captcha.scenes.iter().all(|(_, provider)| *provider == CaptchaProvider::None));
        assert_eq!(settings.captcha.scenes.len(), CaptchaScene::ALL.len());
    }

    #[test]
    fn stored_rows_are_typed() {
        let group = GroupId::random();
        let map = format!("staff={group}");
        let settings = SiteSettings::from_stored(&stored(&[
            ("auth_methods", r#"["passkey","oidc"]"#),
            ("register_enabled", "false"),
            ("register_default_group", &group.to_string()),
            ("mail_smtp_host", "  smtp.example.com "),
            ("mail_smtp_port", "2525"),
            ("mail_smtp_tls", "none"),
            ("events_retention_days", "30"),
            ("oidc_group_map", &map),
            ("captcha_login", "turnstile"),
            ("captcha_turnstile_site_key", "site-key"),
        ]))
        .unwrap();
        assert_eq!(settings.auth_methods, vec![AuthMethod::Passkey, AuthMethod::Oidc]);
        assert!(!settings.register_enabled);
        assert_eq!(settings.register_default_group, Some(group));
        assert_eq!((settings.mail.host.as_str(), settings.mail.port), ("smtp.example.com", 2525));
        assert_eq!(settings.mail.tls, TlsMode::None);
        assert_eq!(settings.events_retention_days, 30);
        assert_eq!(settings.oidc.group_map, vec![("staff".to_owned(), group)]);
        assert_eq!(settings.captcha.provider(CaptchaScene::Login), CaptchaProvider::Turnstile);
        assert_eq!(settings.captcha.provider(CaptchaScene::Register), CaptchaProvider::None);
        let keys = settings.captcha.keys(CaptchaProvider::Turnstile).unwrap();
        assert_eq!(keys.site_key, "site-key");
        assert!(settings.captcha.keys(CaptchaProvider::Builtin).is_none());
    }

    #[test]
    fn a_number_that_does_not_parse_takes_the_default_and_auth_methods_must_parse() {
        let settings =
            SiteSettings::from_stored(&stored(&[("mail_smtp_port", "many"), ("activity_retention_days", "")])).unwrap();
        assert_eq!((settings.mail.port, settings.activity_retention_days), (587, 90));
        assert!(SiteSettings::from_stored(&stored(&[("auth_methods", "email_password")])).is_err());
    }
}
