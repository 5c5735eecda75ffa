//! Which viewers and editors can open a file of an extension: the registry built from the
//! `viewers` setting (the web app's built-in viewers) and the WOPI applications whose discovery
//! lists the extension, kept per master and rebuilt when the settings version changes.

use std::collections::BTreeSet;
use std::sync::Arc;

use nubo_model::db;
use nubo_model::domain::viewer::{BuiltInViewer, normalise_extension, stored_viewers};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::error::{ServiceError, ServiceResult};
use crate::{office::wopi_apps, settings::site};

/// One way to open a file.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Viewer {
    /// `builtin` (a viewer of the web app) or `wopi` (a WOPI application).
    pub kind: String,
    /// The built-in viewer's id (`image`, `video`, `audio`, `pdf`, `markdown`, `text`), or the
    /// WOPI application's name.
    pub name: String,
    /// The WOPI application (for `POST /file/{id}/wopi_session`'s `app_id`).
    pub app_id: Option<Uuid>,
    /// The WOPI actions discovery lists for the extension (`view`, `edit`, `editnew`, ...).
    pub actions: Vec<String>,
    /// Whether it can save changes.
    pub can_edit: bool,
}

/// The viewers of one extension.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Viewers {
    /// The extension asked for, lower case without the dot.
    pub ext: String,
    pub viewers: Vec<Viewer>,
}

/// A WOPI application as the registry keeps it: its actions per extension.
#[derive(Debug)]
struct WopiEntry {
    id: Uuid,
    name: String,
    extensions: Vec<wopi_apps::WopiExtension>,
}

/// What the settings and the WOPI applications say, built once per settings version.
#[derive(Debug)]
pub struct Registry {
    /// The settings version it was built at (the ETag of `GET /file/viewers`).
    pub version: String,
    builtin: Vec<BuiltInViewer>,
    apps: Vec<WopiEntry>,
    /// The origins of every WOPI action URL, for the pages' `frame-src` and `form-action`.
    pub wopi_origins: Vec<String>,
}

impl Registry {
    /// The enabled built-in viewers, then the WOPI applications, that open `ext`.
    pub fn for_extension(&self, ext: &str) -> Viewers {
        let mut viewers: Vec<Viewer> = self
            .builtin
            .iter()
            .filter(|v| v.enabled && v.extensions.iter().any(|e| e == ext))
            .map(|v| Viewer {
                kind: "builtin".to_owned(),
                name: v.id.clone(),
                app_id: None,
                actions: Vec::new(),
                can_edit: v.can_edit,
            })
            .collect();
        for app in &self.apps {
            let Some(entry) = app.extensions.iter().find(|e| e.ext == ext) else { continue };
            viewers.push(Viewer {
                kind: "wopi".to_owned(),
                name: app.name.clone(),
                app_id: Some(app.id),
                actions: entry.actions.clone(),
                can_edit: entry.actions.iter().any(|a| a == "edit"),
            });
        }
        Viewers { ext: ext.to_owned(), viewers }
    }
}

/// The registry at the current settings version: the cached one when the version still
/// matches, else built again from the database.
pub async fn registry(ctx: &Context) -> ServiceResult<Arc<Registry>> {
    let version = site::settings_version(ctx).await?;
    if let Some(registry) = ctx.settings_memo().get::<Registry>().filter(|r| r.version == version) {
        return Ok(registry);
    }
    let builtin = stored_viewers(&site::current(ctx).await?.viewers);
    let mut apps = Vec::new();
    let mut wopi_origins = BTreeSet::new();
    for row in db::wopi_apps::list(ctx.db()).await? {
        wopi_origins.extend(wopi_apps::action_origins(&row));
        let view = wopi_apps::view(&row);
        apps.push(WopiEntry { id: view.id, name: view.name, extensions: view.extensions });
    }
    let registry = Arc::new(Registry { version, builtin, apps, wopi_origins: wopi_origins.into_iter().collect() });
    Ok(ctx.settings_memo().put(registry, |kept, new| kept.version == new.version))
}

/// `ext` lower case without a leading dot: 1 to 16 letters and digits.
pub fn parse_ext(ext: &str) -> ServiceResult<String> {
    normalise_extension(ext)
        .ok_or_else(|| ServiceError::validation("ext", "give a file extension of 1 to 16 letters and digits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_normalised_and_checked() {
        assert_eq!(parse_ext(".DOCX").unwrap(), "docx");
        assert!(parse_ext("").is_err());
        assert!(parse_ext("tar.gz").is_err());
    }

    #[test]
    fn disabled_viewers_are_left_out_and_wopi_applications_follow() {
        let mut builtin = nubo_model::domain::viewer::default_viewers();
        builtin.iter_mut().find(|v| v.id == "markdown").unwrap().enabled = false;
        let app = Uuid::new_v4();
        let registry = Registry {
            version: "v".into(),
            builtin,
            apps: vec![WopiEntry {
                id: app,
                name: "Office".into(),
                extensions: vec![wopi_apps::WopiExtension { ext: "md".into(), actions: vec!["view".into()] }],
            }],
            wopi_origins: Vec::new(),
        };
        let md = registry.for_extension("md");
        let names: Vec<&str> = md.viewers.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["text", "Office"]);
        assert!(md.viewers[0].can_edit);
        assert!(!md.viewers[1].can_edit);
        assert_eq!(md.viewers[1].app_id, Some(app));
        assert!(registry.for_extension("docx").viewers.is_empty());
    }
}
