//! Site-wide information: version, the public site configuration, and writing site settings.

use std::collections::HashMap;

use nubo_model::db::{self, Db};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::GroupId;
use nubo_model::domain::settings::{
    AuthMethod, KNOWN_SETTINGS, SettingKind, SettingsType, known_setting, parse_group_map, validate_setting_value,
};
use nubo_model::domain::time::now_ms;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// The public configuration clients need before anyone signs in.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteConfig {
    pub site_name: String,
    pub footer_code: String,
    pub tos_url: String,
    pub privacy_url: String,
    pub auth_methods: Vec<AuthMethod>,
    pub register_enabled: bool,
    /// New accounts start `INACTIVE` and are mailed a verification link.
    pub register_email_verification: bool,
}

/// Every known setting with its stored value, or its default when none is stored.
pub async fn effective_settings(ctx: &Context) -> ServiceResult<HashMap<&'static str, String>> {
    let db = ctx.db();
    let stored: HashMap<String, String> =
        db::settings::all(db).await?.into_iter().map(|row| (row.name, row.value)).collect();
    Ok(KNOWN_SETTINGS
        .iter()
        .map(|s| (s.name, stored.get(s.name).cloned().unwrap_or_else(|| s.default.to_owned())))
        .collect())
}

/// The settings as administrators read them back: every known setting, secrets (the SMTP
/// password, OAuth client secrets) as an empty string, so they can be replaced but never leave
/// the server.
pub async fn listed_settings(ctx: &Context) -> ServiceResult<HashMap<&'static str, String>> {
    let mut settings = effective_settings(ctx).await?;
    for setting in KNOWN_SETTINGS.iter().filter(|s| s.kind.is_secret()) {
        settings.insert(setting.name, String::new());
    }
    Ok(settings)
}

/// One setting as the catalog describes it to administrators' clients: enough to draw a form
/// field and group the fields, and never a secret's value.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SettingEntry {
    pub name: &'static str,
    /// The category the setting belongs to (the form section).
    pub group: SettingsType,
    /// `text`, `name` (text, not empty), `url` (absolute http(s) or a site path),
    /// `absolute_url`, `mailbox`, `group` (a group id, empty: `Users`), `bool`, `port`, `days`,
    /// `choice` (one of `choices`), `auth_methods` (a list of `choices`), `group_map`
    /// (`value=<group id>` entries separated by commas), `secret` (write-only) or `viewers` (a
    /// list of `{id, enabled, can_edit, extensions}`: the built-in viewers `image`, `video`,
    /// `audio`, `pdf`, `markdown`, `text`; only the last two can edit).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The allowed words of a `choice` or `auth_methods`; empty for other types.
    pub choices: Vec<&'static str>,
    /// The value used while none is stored, typed as `value` is.
    pub default: serde_json::Value,
    /// The current value, typed (booleans, port numbers, method lists); absent for secrets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// For secrets only: whether one is stored. Never the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_set: Option<bool>,
}

/// Every known setting, in the order of [`KNOWN_SETTINGS`] (grouped by category), typed.
pub async fn catalog(ctx: &Context) -> ServiceResult<Vec<SettingEntry>> {
    let settings = effective_settings(ctx).await?;
    Ok(KNOWN_SETTINGS
        .iter()
        .map(|setting| {
            let current = settings.get(setting.name).map(String::as_str).unwrap_or_default();
            let secret = setting.kind.is_secret();
            SettingEntry {
                name: setting.name,
                group: setting.category,
                kind: setting.kind.name(),
                choices: setting.kind.choices(),
                // A secret's default is empty by design; it is never shown either way.
                default: if secret {
                    serde_json::Value::String(String::new())
                } else {
                    setting.kind.typed(setting.default)
                },
                value: (!secret).then(|| setting.kind.typed(current)),
                is_set: secret.then_some(!current.is_empty()),
            }
        })
        .collect())
}

/// What links the service hands out (shares, mailed links) start with: the `site_url` setting
/// without a trailing slash; empty, so links are site paths, when it is not set.
pub async fn link_base(ctx: &Context) -> ServiceResult<String> {
    let site = effective_settings(ctx).await?.remove("site_url").unwrap_or_default();
    Ok(site.trim_end_matches('/').to_owned())
}

pub async fn site_config(ctx: &Context) -> ServiceResult<SiteConfig> {
    let mut settings = effective_settings(ctx).await?;
    let mut take = |name: &str| settings.remove(name).unwrap_or_default();
    let auth_methods = serde_json::from_str(&take("auth_methods"))
        .map_err(|e| ServiceError::internal(anyhow::anyhow!("stored auth_methods is not valid: {e}")))?;
    Ok(SiteConfig {
        site_name: take("site_name"),
        footer_code: take("footer_code"),
        tos_url: take("tos_url"),
        privacy_url: take("privacy_url"),
        register_enabled: take("register_enabled") == "true",
        register_email_verification: take("register_email_verification") == "true",
        auth_methods,
    })
}

/// Refuses a sign-in provider the site has not enabled in `auth_methods`.
pub fn require_enabled_method(config: &SiteConfig, method: AuthMethod) -> ServiceResult<()> {
    if config.auth_methods.contains(&method) {
        Ok(())
    } else {
        Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::AUTH_PROVIDER_DISABLED,
            "this sign-in method is not enabled on this site",
        )
        .with_field("provider"))
    }
}

/// Where the settings version lives: a word that changes whenever settings or the WOPI
/// applications change, so every master knows when what it built from them is stale.
const SETTINGS_VERSION: &str = "settings:version";
/// The version is kept this long without a change; after that a new one is drawn (a rebuild).
const SETTINGS_VERSION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The current settings version (drawn now when there is none).
pub async fn settings_version(ctx: &Context) -> ServiceResult<String> {
    if let Some(version) = ctx.store().get(SETTINGS_VERSION).await? {
        return Ok(version);
    }
    let drawn = uuid::Uuid::new_v4().simple().to_string();
    // Two masters may draw at once: the first one's word stands.
    ctx.store().set_if_absent(SETTINGS_VERSION, &drawn, SETTINGS_VERSION_LIFETIME).await?;
    Ok(ctx.store().get(SETTINGS_VERSION).await?.unwrap_or(drawn))
}

/// Gives the settings a new version: what was built from the old one is rebuilt on next use.
pub async fn settings_changed(ctx: &Context) -> ServiceResult<()> {
    let drawn = uuid::Uuid::new_v4().simple().to_string();
    ctx.store().set(SETTINGS_VERSION, &drawn, Some(SETTINGS_VERSION_LIFETIME)).await?;
    Ok(())
}

/// [`update_settings`] by administrator `actor` (recorded with the names, never the values),
/// then a new settings version.
pub async fn save_settings(
    ctx: &Context,
    actor: uuid::Uuid,
    values: &serde_json::Map<String, serde_json::Value>,
) -> ServiceResult<()> {
    update_settings(ctx.db(), values).await?;
    let names: Vec<&str> = values.keys().map(String::as_str).collect();
    let changed = Activity::by(actor.into(), Action::AdminSettingsUpdate).on(TargetKind::Settings, "site", None);
    activity::record(ctx.db(), changed.with("names", names)).await;
    settings_changed(ctx).await
}

/// Validates and stores several settings at once; all are written or none.
pub async fn update_settings(db: &Db, values: &serde_json::Map<String, serde_json::Value>) -> ServiceResult<()> {
    if values.is_empty() {
        return Err(ServiceError::new(ErrorKind::Validation, codes::SETTINGS_EMPTY, "no settings given"));
    }
    let mut rows = Vec::with_capacity(values.len());
    for (name, value) in values {
        let setting = known_setting(name).ok_or_else(|| {
            ServiceError::new(ErrorKind::Validation, codes::SETTINGS_UNKNOWN, format!("unknown setting {name:?}"))
                .with_field(name.clone())
        })?;
        let text = validate_setting_value(setting, value)
            .map_err(|why| ServiceError::validation(name, format!("{name} {why}")))?;
        if setting.kind == SettingKind::Group && !text.is_empty() {
            let exists = match text.parse::<GroupId>() {
                Ok(id) => db::groups::find(db, id).await?.is_some(),
                Err(_) => false,
            };
            if !exists {
                return Err(ServiceError::validation(name, format!("{name} must name an existing group")));
            }
        }
        if setting.kind == SettingKind::GroupMap {
            for (value, group) in parse_group_map(&text).map_err(|why| ServiceError::validation(name, why))? {
                if db::groups::find(db, GroupId::from(group)).await?.is_none() {
                    return Err(ServiceError::validation(name, format!("{name} maps {value:?} to no existing group")));
                }
            }
        }
        rows.push((setting.name, setting.category.as_str(), text));
    }
    db::settings::upsert_many(db, &rows, now_ms()).await?;
    Ok(())
}
