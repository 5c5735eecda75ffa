//! Which viewers and editors can open a file of an extension: the built-in viewers of the web
//! app (a fixed table) and the WOPI applications whose discovery lists the extension.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::{self, Db};
use crate::error::{ServiceError, ServiceResult};
use crate::service::wopi_apps;

/// The built-in viewers: id, name, whether it can save changes (through `PATCH /file/content`,
/// `max_size` and the quota enforced), and the extensions it opens.
const BUILT_IN: &[(&str, &str, bool, &[&str])] = &[
    ("image", "Image viewer", false, &["jpg", "jpeg", "png", "gif", "webp", "avif", "bmp", "svg", "ico"]),
    ("video", "Video player", false, &["mp4", "webm", "ogv", "mov", "m4v"]),
    ("audio", "Audio player", false, &["mp3", "ogg", "oga", "wav", "flac", "m4a", "opus", "aac"]),
    ("pdf", "PDF viewer", false, &["pdf"]),
    ("markdown", "Markdown", true, &["md", "markdown"]),
    (
        "text",
        "Text and code editor",
        true,
        &[
            "txt", "md", "markdown", "log", "csv", "json", "xml", "yaml", "yml", "toml", "ini", "conf", "html", "css",
            "js", "ts", "jsx", "tsx", "svelte", "rs", "go", "py", "rb", "java", "kt", "c", "h", "cpp", "hpp", "cs",
            "php", "sh", "sql", "lua", "swift",
        ],
    ),
];

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

/// `ext` lower case without a leading dot: 1 to 16 letters and digits.
fn parse_ext(ext: &str) -> ServiceResult<String> {
    let ext = ext.trim().trim_start_matches('.').to_lowercase();
    if ext.is_empty() || ext.len() > 16 || !ext.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(ServiceError::validation("ext", "give a file extension of 1 to 16 letters and digits"));
    }
    Ok(ext)
}

/// The built-in viewers, then the WOPI applications, that open `ext`.
pub async fn for_extension(db: &Db, ext: &str) -> ServiceResult<Viewers> {
    let ext = parse_ext(ext)?;
    let mut viewers: Vec<Viewer> = BUILT_IN
        .iter()
        .filter(|(_, _, _, extensions)| extensions.contains(&ext.as_str()))
        .map(|(id, _, can_edit, _)| Viewer {
            kind: "builtin".to_owned(),
            name: (*id).to_owned(),
            app_id: None,
            actions: Vec::new(),
            can_edit: *can_edit,
        })
        .collect();
    for row in db::wopi_apps::list(db).await? {
        let actions = wopi_apps::actions_for(&row, &ext);
        if actions.is_empty() {
            continue;
        }
        let can_edit = actions.iter().any(|a| a == "edit");
        viewers.push(Viewer { kind: "wopi".to_owned(), name: row.name, app_id: Some(row.id), actions, can_edit });
    }
    Ok(Viewers { ext, viewers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_normalised_and_checked() {
        assert_eq!(parse_ext(".DOCX").unwrap(), "docx");
        assert!(parse_ext("").is_err());
        assert!(parse_ext("tar.gz").is_err());
        assert!(parse_ext(&"x".repeat(17)).is_err());
    }
}
