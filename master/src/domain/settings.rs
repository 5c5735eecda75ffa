//! Site settings: the `SettingsType` categories, the known setting names with their defaults,
//! and the sign-in methods that `auth_methods` may enable.

use serde::{Deserialize, Serialize};

/// The category a setting belongs to; stored beside each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SettingsType {
    Basic,
    Login,
    Register,
    Oauth,
    Mail,
    Captcha,
    Theme,
    Upload,
    Share,
    Task,
}

impl SettingsType {
    pub fn as_str(self) -> &'static str {
        match self {
            SettingsType::Basic => "BASIC",
            SettingsType::Login => "LOGIN",
            SettingsType::Register => "REGISTER",
            SettingsType::Oauth => "OAUTH",
            SettingsType::Mail => "MAIL",
            SettingsType::Captcha => "CAPTCHA",
            SettingsType::Theme => "THEME",
            SettingsType::Upload => "UPLOAD",
            SettingsType::Share => "SHARE",
            SettingsType::Task => "TASK",
        }
    }
}

/// A sign-in provider that the site may enable through `auth_methods`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    EmailPassword,
    Github,
    Qq,
    Passkey,
    MagicLink,
}

/// The value type a setting holds, used to validate writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    Text,
    Url,
    Bool,
    AuthMethods,
    /// A TCP port, 1 to 65535 (a JSON number or its text).
    Port,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Text that is written but never read back through the API (passwords, client secrets).
    Secret,
}

impl SettingKind {
    /// Secrets are left out of every listing of settings.
    pub fn is_secret(self) -> bool {
        self == SettingKind::Secret
    }
}

/// How the master talks to the SMTP server (`mail_smtp_tls`).
pub const MAIL_TLS_MODES: &[&str] = &["none", "starttls", "tls"];

/// One setting the service knows: its name, category, value type and default (as stored text).
#[derive(Debug, Clone, Copy)]
pub struct KnownSetting {
    pub name: &'static str,
    pub category: SettingsType,
    pub kind: SettingKind,
    pub default: &'static str,
}

/// Every setting the service reads. A name not listed here is refused on write.
pub const KNOWN_SETTINGS: &[KnownSetting] = &[
    KnownSetting { name: "site_name", category: SettingsType::Basic, kind: SettingKind::Text, default: "Nubo" },
    KnownSetting { name: "footer_code", category: SettingsType::Basic, kind: SettingKind::Text, default: "" },
    KnownSetting { name: "tos_url", category: SettingsType::Basic, kind: SettingKind::Url, default: "" },
    KnownSetting { name: "privacy_url", category: SettingsType::Basic, kind: SettingKind::Url, default: "" },
    // Where the site is reached from outside (`https://drive.example.com`): links the service
    // hands out (shares) are built on it; empty: they are site paths.
    KnownSetting { name: "site_url", category: SettingsType::Basic, kind: SettingKind::Url, default: "" },
    // The public avatar service (`POST /user/settings/avatar {source: gravatar}`): `{hash}` is the
    // SHA-256 of the trimmed, lower-cased e-mail address, `{size}` the side in pixels.
    KnownSetting {
        name: "avatar_gravatar_url",
        category: SettingsType::Basic,
        kind: SettingKind::Url,
        default: "https://www.gravatar.com/avatar/{hash}?s={size}&d=identicon",
    },
    KnownSetting {
        name: "auth_methods",
        category: SettingsType::Login,
        kind: SettingKind::AuthMethods,
        default: r#"["email_password"]"#,
    },
    KnownSetting {
        name: "register_enabled",
        category: SettingsType::Register,
        kind: SettingKind::Bool,
        default: "true",
    },
    KnownSetting {
        name: "register_default_group",
        category: SettingsType::Register,
        kind: SettingKind::Text,
        default: "",
    },
    // Mail each new account a link to confirm its address; the account stays INACTIVE until then.
    KnownSetting {
        name: "register_email_verification",
        category: SettingsType::Register,
        kind: SettingKind::Bool,
        default: "false",
    },
    // Outgoing mail (magic links, password resets, address verification). An empty host: no mail.
    KnownSetting { name: "mail_smtp_host", category: SettingsType::Mail, kind: SettingKind::Text, default: "" },
    KnownSetting { name: "mail_smtp_port", category: SettingsType::Mail, kind: SettingKind::Port, default: "587" },
    KnownSetting {
        name: "mail_smtp_tls",
        category: SettingsType::Mail,
        kind: SettingKind::Choice(MAIL_TLS_MODES),
        default: "starttls",
    },
    KnownSetting { name: "mail_smtp_user", category: SettingsType::Mail, kind: SettingKind::Text, default: "" },
    KnownSetting { name: "mail_smtp_password", category: SettingsType::Mail, kind: SettingKind::Secret, default: "" },
    // The sender, `address` or `Name <address>`.
    KnownSetting { name: "mail_from", category: SettingsType::Mail, kind: SettingKind::Text, default: "" },
    // OAuth providers (`auth::providers::oauth`): the site's credentials at the provider, and the
    // provider's endpoints (the public ones by default; tests point them at a local server).
    oauth("github_client_id", SettingKind::Text, ""),
    oauth("github_client_secret", SettingKind::Secret, ""),
    oauth("github_authorize_url", SettingKind::Url, "https://github.com/login/oauth/authorize"),
    oauth("github_token_url", SettingKind::Url, "https://github.com/login/oauth/access_token"),
    oauth("github_api_url", SettingKind::Url, "https://api.github.com"),
    oauth("qq_client_id", SettingKind::Text, ""),
    oauth("qq_client_secret", SettingKind::Secret, ""),
    oauth("qq_authorize_url", SettingKind::Url, "https://graph.qq.com/oauth2.0/authorize"),
    oauth("qq_token_url", SettingKind::Url, "https://graph.qq.com/oauth2.0/token"),
    oauth("qq_api_url", SettingKind::Url, "https://graph.qq.com"),
    // Captcha (`service::captcha`): each scene's provider, and the sites' keys at the providers.
    captcha("captcha_register", CAPTCHA_CHOICE, "none"),
    captcha("captcha_login", CAPTCHA_CHOICE, "none"),
    captcha("captcha_magic_link", CAPTCHA_CHOICE, "none"),
    captcha("captcha_password_reset", CAPTCHA_CHOICE, "none"),
    captcha("captcha_share_password", CAPTCHA_CHOICE, "none"),
    captcha("captcha_report", CAPTCHA_CHOICE, "none"),
    captcha("captcha_redeem", CAPTCHA_CHOICE, "none"),
    captcha("captcha_recaptcha_site_key", SettingKind::Text, ""),
    captcha("captcha_recaptcha_secret", SettingKind::Secret, ""),
    captcha("captcha_recaptcha_verify_url", SettingKind::Url, "https://www.google.com/recaptcha/api/siteverify"),
    captcha("captcha_turnstile_site_key", SettingKind::Text, ""),
    captcha("captcha_turnstile_secret", SettingKind::Secret, ""),
    captcha(
        "captcha_turnstile_verify_url",
        SettingKind::Url,
        "https://challenges.cloudflare.com/turnstile/v0/siteverify",
    ),
];

const CAPTCHA_CHOICE: SettingKind = SettingKind::Choice(crate::domain::captcha::CAPTCHA_PROVIDERS);

const fn captcha(name: &'static str, kind: SettingKind, default: &'static str) -> KnownSetting {
    KnownSetting { name, category: SettingsType::Captcha, kind, default }
}

const fn oauth(name: &'static str, kind: SettingKind, default: &'static str) -> KnownSetting {
    KnownSetting { name, category: SettingsType::Oauth, kind, default }
}

pub fn known_setting(name: &str) -> Option<&'static KnownSetting> {
    KNOWN_SETTINGS.iter().find(|s| s.name == name)
}

/// Checks a value against its setting's type and returns the text to store.
pub fn validate_setting_value(setting: &KnownSetting, value: &serde_json::Value) -> Result<String, String> {
    match (setting.kind, value) {
        (SettingKind::Text, serde_json::Value::String(s)) => Ok(s.clone()),
        (SettingKind::Url, serde_json::Value::String(s)) => {
            if s.is_empty() || s.starts_with("https://") || s.starts_with("http://") || s.starts_with('/') {
                Ok(s.clone())
            } else {
                Err("must be empty, an absolute http(s) URL or a site path".to_owned())
            }
        }
        (SettingKind::Bool, serde_json::Value::Bool(b)) => Ok(b.to_string()),
        (SettingKind::AuthMethods, v @ serde_json::Value::Array(_)) => {
            let methods: Vec<AuthMethod> = serde_json::from_value(v.clone())
                .map_err(|_| "must be a list of: email_password, github, qq, passkey, magic_link".to_owned())?;
            Ok(serde_json::to_string(&methods).unwrap_or_default())
        }
        (SettingKind::Port, serde_json::Value::Number(n)) => {
            n.as_u64().filter(|p| (1..=65535).contains(p)).map(|p| p.to_string()).ok_or_else(port_range)
        }
        (SettingKind::Port, serde_json::Value::String(s)) => {
            s.parse::<u16>().ok().filter(|p| *p != 0).map(|p| p.to_string()).ok_or_else(port_range)
        }
        (SettingKind::Choice(words), serde_json::Value::String(s)) if words.contains(&s.as_str()) => Ok(s.clone()),
        (SettingKind::Choice(words), _) => Err(format!("must be one of: {}", words.join(", "))),
        (SettingKind::Secret, serde_json::Value::String(s)) => Ok(s.clone()),
        (SettingKind::Text | SettingKind::Url | SettingKind::Secret, _) => Err("must be a string".to_owned()),
        (SettingKind::Port, _) => Err(port_range()),
        (SettingKind::Bool, _) => Err("must be true or false".to_owned()),
        (SettingKind::AuthMethods, _) => Err("must be a list of sign-in methods".to_owned()),
    }
}

fn port_range() -> String {
    "must be a port number from 1 to 65535".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn email_password_sign_in_is_enabled_by_default() {
        let methods: Vec<AuthMethod> = serde_json::from_str(known_setting("auth_methods").unwrap().default).unwrap();
        assert_eq!(methods, vec![AuthMethod::EmailPassword]);
    }

    #[test]
    fn settings_type_includes_oauth() {
        assert_eq!(serde_json::to_value(SettingsType::Oauth).unwrap(), json!("OAUTH"));
        assert_eq!(SettingsType::Oauth.as_str(), "OAUTH");
    }

    #[test]
    fn values_are_checked_against_their_kind() {
        let tos = known_setting("tos_url").unwrap();
        assert!(validate_setting_value(tos, &json!("https://example.com/tos")).is_ok());
        assert!(validate_setting_value(tos, &json!("javascript:alert(1)")).is_err());
        assert!(validate_setting_value(tos, &json!(5)).is_err());
        let methods = known_setting("auth_methods").unwrap();
        assert_eq!(
            validate_setting_value(methods, &json!(["passkey", "email_password"])).unwrap(),
            r#"["passkey","email_password"]"#
        );
        assert!(validate_setting_value(methods, &json!(["telepathy"])).is_err());
        let register = known_setting("register_enabled").unwrap();
        assert_eq!(validate_setting_value(register, &json!(false)).unwrap(), "false");
        assert!(validate_setting_value(register, &json!("no")).is_err());
    }

    #[test]
    fn mail_settings_are_checked() {
        let port = known_setting("mail_smtp_port").unwrap();
        assert_eq!(validate_setting_value(port, &json!(2525)).unwrap(), "2525");
        assert_eq!(validate_setting_value(port, &json!("465")).unwrap(), "465");
        assert!(validate_setting_value(port, &json!(0)).is_err());
        assert!(validate_setting_value(port, &json!(70000)).is_err());
        let tls = known_setting("mail_smtp_tls").unwrap();
        assert_eq!(validate_setting_value(tls, &json!("none")).unwrap(), "none");
        assert!(validate_setting_value(tls, &json!("ssl")).is_err());
        assert!(known_setting("mail_smtp_password").unwrap().kind.is_secret());
    }

    #[test]
    fn client_secrets_are_secret_and_known() {
        for name in ["github_client_secret", "qq_client_secret"] {
            assert!(known_setting(name).is_some_and(|s| s.kind.is_secret()), "{name}");
        }
        assert!(!known_setting("github_client_id").unwrap().kind.is_secret());
        for name in ["captcha_recaptcha_secret", "captcha_turnstile_secret"] {
            assert!(known_setting(name).is_some_and(|s| s.kind.is_secret()), "{name}");
        }
    }

    #[test]
    fn known_setting_names_are_unique() {
        let mut names: Vec<_> = KNOWN_SETTINGS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOWN_SETTINGS.len());
    }
}
