//! Site-wide information: the settings as one typed value (read once per settings version),
//! the public site configuration, the administrators' listing, and writing site settings.

use std::collections::HashMap;
use std::sync::Arc;

use nubo_model::db::{self, Db};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::settings::{
    AuthMethod, KNOWN_SETTINGS, SettingKind, SettingsType, known_setting, parse_group_map, validate_setting_value,
};
use nubo_model::domain::site_settings::SiteSettings;
use nubo_model::domain::time::now_ms;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// The settings at the current version: the ones parsed last while the version is the same,
/// else parsed again from the database. Every settings write draws a new version in the same
/// transaction, so a change on one master is read by every other at its next request.
pub async fn current(ctx: &Context) -> ServiceResult<Arc<SiteSettings>> {
    let version = settings_version(ctx).await?;
    if let Some(parsed) = ctx.settings_memo().get::<Parsed>().filter(|parsed| parsed.version == version) {
        return Ok(parsed.settings.clone());
    }
    let stored = stored_rows(ctx).await?;
    let settings =
        Arc::new(SiteSettings::from_stored(&stored).map_err(|why| ServiceError::internal(anyhow::anyhow!(why)))?);
    let parsed = Arc::new(Parsed { version, settings });
    Ok(ctx.settings_memo().put(parsed, |kept, new| kept.version == new.version).settings.clone())
}

/// The settings parsed at one version.
struct Parsed {
    version: String,
    settings: Arc<SiteSettings>,
}

/// The stored settings' texts by name.
async fn stored_rows(ctx: &Context) -> ServiceResult<HashMap<String, String>> {
    Ok(db::settings::all(ctx.db()).await?.into_iter().map(|row| (row.name, row.value)).collect())
}

/// Every known setting with its stored text, or its default when none is stored.
async fn effective_settings(ctx: &Context) -> ServiceResult<HashMap<&'static str, String>> {
    let stored = stored_rows(ctx).await?;
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
    Ok(current(ctx).await?.site_url.trim_end_matches('/').to_owned())
}

/// Refuses a sign-in provider the site has not enabled in `auth_methods` (the current settings).
pub async fn require_method(ctx: &Context, method: AuthMethod) -> ServiceResult<()> {
    let settings = current(ctx).await?;
    require_enabled_method(&settings, method)
}

/// Refuses a sign-in provider the site has not enabled in `auth_methods`.
pub fn require_enabled_method(config: &SiteSettings, method: AuthMethod) -> ServiceResult<()> {
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

/// The current settings version (`initial` until settings were first written).
pub async fn settings_version(ctx: &Context) -> ServiceResult<String> {
    Ok(db::settings::version(ctx.db()).await?.unwrap_or_else(|| "initial".to_owned()))
}

fn new_version() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Gives the settings a new version: what was built from the old one is rebuilt on next use.
pub async fn settings_changed(ctx: &Context) -> ServiceResult<()> {
    Ok(db::settings::set_version(ctx.db(), &new_version(), now_ms()).await?)
}

/// [`update_settings`] by administrator `actor`, recorded with the names (never the values).
pub async fn save_settings(
    ctx: &Context,
    actor: UserId,
    values: &serde_json::Map<String, serde_json::Value>,
) -> ServiceResult<()> {
    update_settings(ctx.db(), values).await?;
    let names: Vec<&str> = values.keys().map(String::as_str).collect();
    let changed = Activity::by(actor, Action::AdminSettingsUpdate).on(TargetKind::Settings, "site", None);
    activity::record(ctx.db(), changed.with("names", names)).await;
    Ok(())
}

/// Validates and stores several settings at once, with a new settings version; all are written
/// or none.
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
    db::settings::upsert_many(db, &rows, &new_version(), now_ms()).await?;
    Ok(())
}
