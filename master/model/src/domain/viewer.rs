//! The built-in viewers of the web app as the `viewers` setting lists them: which viewer opens
//! which extensions, whether it is offered at all and whether it may save changes.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The viewers the web app can draw, and whether each one is able to save (through
/// `PATCH /file/content`). The setting may narrow these, never widen them.
pub const BUILT_IN_IDS: &[(&str, bool)] =
    &[("image", false), ("video", false), ("audio", false), ("pdf", false), ("markdown", true), ("text", true)];

/// The `viewers` setting's default: every built-in viewer on, with the extensions it opens.
pub const DEFAULT_VIEWERS: &str = r#"[
 {"id":"image","enabled":true,"can_edit":false,"extensions":["jpg","jpeg","png","gif","webp","avif","bmp","svg","ico"]},
 {"id":"video","enabled":true,"can_edit":false,"extensions":["mp4","webm","ogv","mov","m4v"]},
 {"id":"audio","enabled":true,"can_edit":false,"extensions":["mp3","ogg","oga","wav","flac","m4a","opus","aac"]},
 {"id":"pdf","enabled":true,"can_edit":false,"extensions":["pdf"]},
 {"id":"markdown","enabled":true,"can_edit":true,"extensions":["md","markdown"]},
 {"id":"text","enabled":true,"can_edit":true,"extensions":["txt","md","markdown","log","csv","json","xml","yaml","yml","toml","ini","conf","html","css","js","ts","jsx","tsx","svelte","rs","go","py","rb","java","kt","c","h","cpp","hpp","cs","php","sh","sql","lua","swift"]}
]"#;

/// Most extensions one viewer may list.
const MAX_EXTENSIONS: usize = 500;

/// One built-in viewer's entry in the `viewers` setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuiltInViewer {
    /// `image`, `video`, `audio`, `pdf`, `markdown` or `text`.
    pub id: String,
    /// Offered to users at all.
    pub enabled: bool,
    /// Offers saving changes; only `markdown` and `text` can.
    pub can_edit: bool,
    /// The extensions it opens, lower case without the dot.
    pub extensions: Vec<String>,
}

/// `ext` lower case without a leading dot, when it is 1 to 16 letters and digits.
pub fn normalise_extension(ext: &str) -> Option<String> {
    let ext = ext.trim().trim_start_matches('.').to_lowercase();
    (!ext.is_empty() && ext.len() <= 16 && ext.chars().all(|c| c.is_ascii_alphanumeric())).then_some(ext)
}

/// Reads and checks a `viewers` value: known ids, each once, editing only where the viewer can
/// save, valid extensions (normalised, duplicates dropped).
pub fn parse_viewers(value: &serde_json::Value) -> Result<Vec<BuiltInViewer>, String> {
    let mut viewers: Vec<BuiltInViewer> = serde_json::from_value(value.clone())
        .map_err(|e| format!("must be a list of {{id, enabled, can_edit, extensions}} ({e})"))?;
    let mut seen = Vec::new();
    for viewer in &mut viewers {
        let Some((_, can_save)) = BUILT_IN_IDS.iter().find(|(id, _)| *id == viewer.id) else {
            let ids: Vec<&str> = BUILT_IN_IDS.iter().map(|(id, _)| *id).collect();
            return Err(format!("names an unknown viewer {:?} (known: {})", viewer.id, ids.join(", ")));
        };
        if seen.contains(&viewer.id) {
            return Err(format!("lists the viewer {:?} twice", viewer.id));
        }
        seen.push(viewer.id.clone());
        if viewer.can_edit && !can_save {
            return Err(format!("lets {:?} edit, but only markdown and text can save", viewer.id));
        }
        if viewer.extensions.len() > MAX_EXTENSIONS {
            return Err(format!("gives {:?} more than {MAX_EXTENSIONS} extensions", viewer.id));
        }
        let mut extensions: Vec<String> = Vec::with_capacity(viewer.extensions.len());
        for ext in &viewer.extensions {
            let ext = normalise_extension(ext).ok_or_else(|| {
                format!("has an invalid extension {ext:?} for {:?} (1 to 16 letters and digits)", viewer.id)
            })?;
            if !extensions.contains(&ext) {
                extensions.push(ext);
            }
        }
        viewer.extensions = extensions;
    }
    Ok(viewers)
}

/// The stored `viewers` text as a list; the default when it cannot be read (it was checked on
/// write, so that only happens to a hand-edited database).
pub fn stored_viewers(text: &str) -> Vec<BuiltInViewer> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| parse_viewers(&v).ok())
        .unwrap_or_else(default_viewers)
}

pub fn default_viewers() -> Vec<BuiltInViewer> {
    serde_json::from_str(DEFAULT_VIEWERS).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_default_lists_every_built_in_viewer_and_is_valid() {
        let parsed = parse_viewers(&serde_json::from_str(DEFAULT_VIEWERS).unwrap()).unwrap();
        let ids: Vec<&str> = parsed.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, BUILT_IN_IDS.iter().map(|(id, _)| *id).collect::<Vec<_>>());
        assert_eq!(parsed, default_viewers());
    }

    #[test]
    fn unknown_duplicate_and_overreaching_entries_are_refused() {
        let one = |id: &str, can_edit: bool, ext: &str| json!([{"id": id, "enabled": true, "can_edit": can_edit, "extensions": [ext]}]);
        assert!(parse_viewers(&one("flash", false, "swf")).unwrap_err().contains("unknown viewer"));
        assert!(parse_viewers(&one("image", true, "png")).unwrap_err().contains("only markdown and text"));
        assert!(parse_viewers(&one("text", false, "tar.gz")).unwrap_err().contains("invalid extension"));
        let twice = json!([
            {"id": "pdf", "enabled": true, "can_edit": false, "extensions": []},
            {"id": "pdf", "enabled": false, "can_edit": false, "extensions": []}
        ]);
        assert!(parse_viewers(&twice).unwrap_err().contains("twice"));
        assert!(parse_viewers(&json!({"id": "pdf"})).is_err());
    }

    #[test]
    fn extensions_are_normalised_and_deduplicated() {
        let value = json!([{"id": "text", "enabled": true, "can_edit": true, "extensions": [".TXT", "txt", "Log"]}]);
        assert_eq!(parse_viewers(&value).unwrap()[0].extensions, ["txt", "log"]);
        assert_eq!(normalise_extension(".DOCX").as_deref(), Some("docx"));
        assert_eq!(normalise_extension(""), None);
        assert_eq!(normalise_extension(&"x".repeat(17)), None);
    }
}
