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
    Viewer,
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
            SettingsType::Viewer => "VIEWER",
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
    /// A generic OpenID Connect provider (`oidc_*` settings): Keycloak, Authentik, Azure AD, Google.
    Oidc,
}

/// The value type a setting holds, used to validate writes and named in the settings catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    Text,
    /// Text that must not be empty (the site's name).
    Name,
    /// Empty, an absolute http(s) URL, or a path on this site (`/terms`).
    Url,
    /// Empty or an absolute http(s) URL (where the site is reached from outside).
    AbsoluteUrl,
    /// Empty or a mail address, `address` or `Name <address>`.
    Mailbox,
    /// Empty (the built-in `Users` group) or the id of an existing group; the service checks
    /// that it exists.
    Group,
    Bool,
    AuthMethods,
    /// A TCP port, 1 to 65535 (a JSON number or its text).
    Port,
    /// A number of days, 1 to [`MAX_DAYS`] (a JSON number or its text).
    Days,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Text that is written but never read back through the API (passwords, client secrets).
    Secret,
    /// The built-in viewers: a list of `{id, enabled, can_edit, extensions}`
    /// ([`crate::domain::viewer::BuiltInViewer`]).
    Viewers,
    /// Empty, or `value=<group id>` entries separated by commas (`oidc_group_map`): a claim's
    /// value and the group it puts a user in. The service checks that the groups exist.
    GroupMap,
}

impl SettingKind {
    /// Secrets are left out of every listing of settings.
    pub fn is_secret(self) -> bool {
        self == SettingKind::Secret
    }

    /// The type's name in the settings catalog.
    pub fn name(self) -> &'static str {
        match self {
            SettingKind::Text => "text",
            SettingKind::Name => "name",
            SettingKind::Url => "url",
            SettingKind::AbsoluteUrl => "absolute_url",
            SettingKind::Mailbox => "mailbox",
            SettingKind::Group => "group",
            SettingKind::Bool => "bool",
            SettingKind::AuthMethods => "auth_methods",
            SettingKind::Port => "port",
            SettingKind::Days => "days",
            SettingKind::Choice(_) => "choice",
            SettingKind::Secret => "secret",
            SettingKind::Viewers => "viewers",
            SettingKind::GroupMap => "group_map",
        }
    }

    /// The words a `choice` allows (every sign-in method for `auth_methods`); empty otherwise.
    pub fn choices(self) -> Vec<&'static str> {
        match self {
            SettingKind::Choice(words) => words.to_vec(),
            SettingKind::AuthMethods => AUTH_METHOD_NAMES.to_vec(),
            _ => Vec::new(),
        }
    }

    /// A stored value as JSON of its type (what `PATCH /admin/settings` takes): booleans and
    /// ports as such, `auth_methods` as a list, the rest as text.
    pub fn typed(self, stored: &str) -> serde_json::Value {
        use serde_json::Value;
        match self {
            SettingKind::Bool => Value::Bool(stored == "true"),
            SettingKind::Port => stored.parse::<u16>().map_or_else(|_| Value::String(stored.to_owned()), Value::from),
            SettingKind::Days => stored.parse::<u32>().map_or_else(|_| Value::String(stored.to_owned()), Value::from),
            SettingKind::AuthMethods => {
                serde_json::from_str(stored).unwrap_or_else(|_| Value::String(stored.to_owned()))
            }
            SettingKind::Viewers => serde_json::to_value(crate::domain::viewer::stored_viewers(stored))
                .unwrap_or_else(|_| Value::String(stored.to_owned())),
            _ => Value::String(stored.to_owned()),
        }
    }
}

/// Every sign-in method's name, as `auth_methods` lists them.
pub const AUTH_METHOD_NAMES: &[&str] = &["email_password", "github", "qq", "passkey", "magic_link", "oidc"];

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

/// The most days a `days` setting holds (ten years).
pub const MAX_DAYS: u64 = 3650;

/// Every setting the service reads. A name not listed here is refused on write.
pub const KNOWN_SETTINGS: &[KnownSetting] = &[
    KnownSetting { name: "site_name", category: SettingsType::Basic, kind: SettingKind::Name, default: "Nubo" },
    KnownSetting { name: "footer_code", category: SettingsType::Basic, kind: SettingKind::Text, default: "" },
    KnownSetting { name: "tos_url", category: SettingsType::Basic, kind: SettingKind::Url, default: "" },
    KnownSetting { name: "privacy_url", category: SettingsType::Basic, kind: SettingKind::Url, default: "" },
    // Where the site is reached from outside (`https://drive.example.com`): links the service
    // hands out (shares) are built on it; empty: they are site paths.
    KnownSetting { name: "site_url", category: SettingsType::Basic, kind: SettingKind::AbsoluteUrl, default: "" },
    // The public avatar service (`POST /user/settings/avatar {source: gravatar}`): `{hash}` is the
    // SHA-256 of the trimmed, lower-cased e-mail address, `{size}` the side in pixels.
    KnownSetting {
        name: "avatar_gravatar_url",
        category: SettingsType::Basic,
        kind: SettingKind::Url,
        default: "https://www.gravatar.com/avatar/{hash}?s={size}&d=identicon",
    },
    // How long the activity log keeps a row; the `activity-prune` job deletes older ones.
    KnownSetting {
        name: "activity_retention_days",
        category: SettingsType::Basic,
        kind: SettingKind::Days,
        default: "90",
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
        kind: SettingKind::Group,
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
    KnownSetting { name: "mail_from", category: SettingsType::Mail, kind: SettingKind::Mailbox, default: "" },
    // OAuth providers (`identity::providers::oauth`): the site's credentials at the provider, and the
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
    // OpenID Connect (`identity::providers::oidc`): the sign-in button's label, the issuer (its
    // discovery document is `{issuer}/.well-known/openid-configuration`), whether the issuer may
    // be on a private address (the SSRF guard refuses those otherwise), the site's credentials,
    // the scopes asked for, and the optional mapping of a claim's values to groups.
    oauth("oidc_display_name", SettingKind::Text, "OpenID Connect"),
    oauth("oidc_issuer", SettingKind::AbsoluteUrl, ""),
    oauth("oidc_internal", SettingKind::Bool, "false"),
    oauth("oidc_client_id", SettingKind::Text, ""),
    oauth("oidc_client_secret", SettingKind::Secret, ""),
    oauth("oidc_scopes", SettingKind::Text, "openid email profile"),
    oauth("oidc_group_claim", SettingKind::Text, ""),
    oauth("oidc_group_map", SettingKind::GroupMap, ""),
    // Captcha (`service::identity::captcha`): each scene's provider, and the sites' keys at the providers.
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
    // How long change events (`GET /events`) are kept for clients to resume from.
    KnownSetting {
        name: "events_retention_days",
        category: SettingsType::Basic,
        kind: SettingKind::Days,
        default: "7",
    },
    // The web app's built-in viewers (`GET /file/viewers`); WOPI applications are `/admin/wopi`.
    KnownSetting {
        name: "viewers",
        category: SettingsType::Viewer,
        kind: SettingKind::Viewers,
        default: crate::domain::viewer::DEFAULT_VIEWERS,
    },
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

/// The longest text a setting holds (the footer code is the long one).
pub const MAX_SETTING_LENGTH: usize = 64 * 1024;

/// An absolute http(s) URL with a host.
fn is_absolute_http_url(text: &str) -> bool {
    reqwest::Url::parse(text)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty()))
}

/// Checks a value against its setting's type and returns the text to store. Whether a group
/// exists (`SettingKind::Group`) is for the caller to check: it needs the database.
pub fn validate_setting_value(setting: &KnownSetting, value: &serde_json::Value) -> Result<String, String> {
    if let serde_json::Value::String(s) = value
        && s.len() > MAX_SETTING_LENGTH
    {
        return Err(format!("must be at most {MAX_SETTING_LENGTH} bytes"));
    }
    match (setting.kind, value) {
        (SettingKind::Text, serde_json::Value::String(s)) => Ok(s.clone()),
        (SettingKind::Name, serde_json::Value::String(s)) => {
            let name = s.trim();
            if name.is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control) {
                Err("must be 1 to 128 characters, without control characters".to_owned())
            } else {
                Ok(name.to_owned())
            }
        }
        (SettingKind::Url, serde_json::Value::String(s)) => {
            // A site path, but not `//host/...`: browsers read that as another site.
            let site_path = s.starts_with('/') && !s.starts_with("//") && !s.contains(char::is_whitespace);
            if s.is_empty() || site_path || is_absolute_http_url(s) {
                Ok(s.clone())
            } else {
                Err("must be empty, an absolute http(s) URL or a site path".to_owned())
            }
        }
        (SettingKind::AbsoluteUrl, serde_json::Value::String(s)) => {
            if s.is_empty() || is_absolute_http_url(s) {
                Ok(s.clone())
            } else {
                Err("must be empty or an absolute http(s) URL such as https://drive.example.com".to_owned())
            }
        }
        (SettingKind::Mailbox, serde_json::Value::String(s)) => {
            let s = s.trim();
            if s.is_empty() || s.parse::<lettre::message::Mailbox>().is_ok() {
                Ok(s.to_owned())
            } else {
                Err("must be empty or an address such as Nubo <nubo@example.com>".to_owned())
            }
        }
        (SettingKind::Group, serde_json::Value::String(s)) => {
            if s.is_empty() || uuid::Uuid::parse_str(s).is_ok() {
                Ok(s.to_ascii_lowercase())
            } else {
                Err("must be empty (the Users group) or a group id".to_owned())
            }
        }
        (SettingKind::Bool, serde_json::Value::Bool(b)) => Ok(b.to_string()),
        (SettingKind::AuthMethods, v @ serde_json::Value::Array(_)) => {
            let methods: Vec<AuthMethod> = serde_json::from_value(v.clone())
                .map_err(|_| format!("must be a list of: {}", AUTH_METHOD_NAMES.join(", ")))?;
            Ok(serde_json::to_string(&methods).unwrap_or_default())
        }
        (SettingKind::Port, serde_json::Value::Number(n)) => {
            n.as_u64().filter(|p| (1..=65535).contains(p)).map(|p| p.to_string()).ok_or_else(port_range)
        }
        (SettingKind::Port, serde_json::Value::String(s)) => {
            s.parse::<u16>().ok().filter(|p| *p != 0).map(|p| p.to_string()).ok_or_else(port_range)
        }
        (SettingKind::Days, serde_json::Value::Number(n)) => {
            n.as_u64().filter(|d| (1..=MAX_DAYS).contains(d)).map(|d| d.to_string()).ok_or_else(days_range)
        }
        (SettingKind::Days, serde_json::Value::String(s)) => {
            s.parse::<u64>().ok().filter(|d| (1..=MAX_DAYS).contains(d)).map(|d| d.to_string()).ok_or_else(days_range)
        }
        (SettingKind::Choice(words), serde_json::Value::String(s)) if words.contains(&s.as_str()) => Ok(s.clone()),
        (SettingKind::Choice(words), _) => Err(format!("must be one of: {}", words.join(", "))),
        (SettingKind::Secret, serde_json::Value::String(s)) => Ok(s.clone()),
        (SettingKind::Viewers, value) => {
            let viewers = crate::domain::viewer::parse_viewers(value)?;
            serde_json::to_string(&viewers).map_err(|e| e.to_string())
        }
        (SettingKind::GroupMap, serde_json::Value::String(s)) => {
            let entries = parse_group_map(s)?;
            Ok(entries.iter().map(|(value, group)| format!("{value}={group}")).collect::<Vec<_>>().join(","))
        }
        (
            SettingKind::Text
            | SettingKind::Name
            | SettingKind::Url
            | SettingKind::AbsoluteUrl
            | SettingKind::Mailbox
            | SettingKind::Group
            | SettingKind::Secret
            | SettingKind::GroupMap,
            _,
        ) => Err("must be a string".to_owned()),
        (SettingKind::Port, _) => Err(port_range()),
        (SettingKind::Days, _) => Err(days_range()),
        (SettingKind::Bool, _) => Err("must be true or false".to_owned()),
        (SettingKind::AuthMethods, _) => Err("must be a list of sign-in methods".to_owned()),
    }
}

/// The entries of an `oidc_group_map` text, in order: `value=<group id>` separated by commas,
/// spaces around either trimmed; a value appears once. Empty text: no entries.
pub fn parse_group_map(text: &str) -> Result<Vec<(String, uuid::Uuid)>, String> {
    let mut entries: Vec<(String, uuid::Uuid)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || format!("must be value=<group id> entries separated by commas; {entry:?} is not one");
        let (value, group) = entry.rsplit_once('=').ok_or_else(bad)?;
        let (value, group) = (value.trim(), group.trim());
        let group = uuid::Uuid::parse_str(group).map_err(|_| bad())?;
        if value.is_empty() || value.chars().any(char::is_control) {
            return Err(bad());
        }
        if entries.iter().any(|(seen, _)| seen == value) {
            return Err(format!("maps {value:?} twice"));
        }
        entries.push((value.to_owned(), group));
    }
    Ok(entries)
}

fn port_range() -> String {
    "must be a port number from 1 to 65535".to_owned()
}

fn days_range() -> String {
    format!("must be a number of days from 1 to {MAX_DAYS}")
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
    fn loose_values_are_refused() {
        let site_url = known_setting("site_url").unwrap();
        assert!(validate_setting_value(site_url, &json!("https://drive.example.com")).is_ok());
        assert!(validate_setting_value(site_url, &json!("")).is_ok());
        for bad in ["/drive", "https://", "ftp://example.com", "drive.example.com", "javascript:alert(1)"] {
            assert!(validate_setting_value(site_url, &json!(bad)).is_err(), "{bad}");
        }
        let tos = known_setting("tos_url").unwrap();
        assert!(validate_setting_value(tos, &json!("/terms")).is_ok());
        assert!(validate_setting_value(tos, &json!("//evil.example/terms")).is_err());
        let name = known_setting("site_name").unwrap();
        assert_eq!(validate_setting_value(name, &json!("  Drive  ")).unwrap(), "Drive");
        assert!(validate_setting_value(name, &json!("   ")).is_err());
        let from = known_setting("mail_from").unwrap();
        assert!(validate_setting_value(from, &json!("Nubo <nubo@example.com>")).is_ok());
        assert!(validate_setting_value(from, &json!("not an address")).is_err());
        let group = known_setting("register_default_group").unwrap();
        assert!(validate_setting_value(group, &json!("staff")).is_err());
        assert!(validate_setting_value(group, &json!("")).is_ok());
        let footer = known_setting("footer_code").unwrap();
        assert!(validate_setting_value(footer, &json!("x".repeat(MAX_SETTING_LENGTH + 1))).is_err());
    }

    #[test]
    fn stored_values_read_back_typed() {
        assert_eq!(SettingKind::Bool.typed("true"), json!(true));
        assert_eq!(SettingKind::Port.typed("587"), json!(587));
        assert_eq!(SettingKind::AuthMethods.typed(r#"["passkey"]"#), json!(["passkey"]));
        assert_eq!(SettingKind::Text.typed("x"), json!("x"));
        let methods: Vec<AuthMethod> = serde_json::from_value(json!(AUTH_METHOD_NAMES)).unwrap();
        assert_eq!(methods.len(), AUTH_METHOD_NAMES.len(), "every name is a method");
    }

    #[test]
    fn group_maps_are_checked_and_normalised() {
        let map = known_setting("oidc_group_map").unwrap();
        let (a, b) = ("5b0f4a52-3c39-4a43-9a57-08d2ffcb3e8a", "0e9ac7a4-71a4-4a8e-b4f1-6bd2f0a3a9c1");
        assert_eq!(validate_setting_value(map, &json!("")).unwrap(), "");
        assert_eq!(
            validate_setting_value(map, &json!(format!(" admins = {a} ,staff={b},"))).unwrap(),
            format!("admins={a},staff={b}")
        );
        // A value may hold `=` (a DN such as `cn=admins`): the group id follows the last one.
        assert_eq!(
            parse_group_map(&format!("cn=admins={a}")).unwrap(),
            vec![("cn=admins".to_owned(), a.parse().unwrap())]
        );
        for bad in ["admins", "admins=staff", &format!("={a}"), &format!("x={a},x={b}")] {
            assert!(validate_setting_value(map, &json!(bad)).is_err(), "{bad}");
        }
        assert!(validate_setting_value(map, &json!(5)).is_err());
        assert!(known_setting("oidc_client_secret").unwrap().kind.is_secret());
        let methods: Vec<AuthMethod> = serde_json::from_value(json!(["oidc"])).unwrap();
        assert_eq!(methods, vec![AuthMethod::Oidc]);
    }

    #[test]
    fn known_setting_names_are_unique() {
        let mut names: Vec<_> = KNOWN_SETTINGS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KNOWN_SETTINGS.len());
    }
}
