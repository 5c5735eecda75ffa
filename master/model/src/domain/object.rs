//! Files and folders as values: names and kinds.

use std::fmt;

pub use nubo_common::http::attachment_disposition;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Whether an object is a file or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    File,
    Folder,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::File => "file",
            ObjectKind::Folder => "folder",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "file" => Some(ObjectKind::File),
            "folder" => Some(ObjectKind::Folder),
            _ => None,
        }
    }
}

impl std::str::FromStr for ObjectKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObjectKind::parse(s).ok_or_else(|| format!("unknown object kind {s:?}"))
    }
}

/// A valid object name: 1..=255 bytes of UTF-8, no `/`, not `.` or `..`, not only whitespace,
/// and no control characters (newlines, NUL, ...) or bidirectional formatting characters (the
/// right-to-left override and its kin make `exe.pdf` display as `fdp.exe`). Also refused, so
/// that every client can hold what the server holds: a trailing space (Windows drops it, so
/// `a ` and `a` would be one file there), a backslash (a path separator on Windows, where a
/// synced `a\b` would become `b` in folder `a`; `nubo sync` and desktop WebDAV clients cannot
/// write it), and Unicode noncharacters (U+FFFE, U+FDD0...: reserved for a program's internal
/// use, never for interchange). The REST API and WebDAV share this one rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectName(String);

pub const MAX_NAME_BYTES: usize = 255;

impl ObjectName {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        if raw.is_empty() {
            return Err("name may not be empty");
        }
        if raw.len() > MAX_NAME_BYTES {
            return Err("name is longer than 255 bytes");
        }
        if raw == "." || raw == ".." {
            return Err("name may not be . or ..");
        }
        if raw.contains('/') {
            return Err("name may not contain /");
        }
        if raw.contains('\\') {
            return Err("name may not contain \\ (a path separator on Windows)");
        }
        if raw.chars().any(is_noncharacter) {
            return Err("name may not contain Unicode noncharacters such as U+FFFE");
        }
        if raw.chars().any(char::is_control) {
            return Err("name may not contain control characters such as newlines or tabs");
        }
        if raw.chars().any(is_bidi_control) {
            return Err("name may not contain bidirectional formatting characters");
        }
        if raw.chars().all(char::is_whitespace) {
            return Err("name may not be only whitespace");
        }
        if raw.ends_with(' ') {
            return Err("name may not end with a space");
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `stem (n).ext`: the name a copy or a second file of this name takes when this one is
    /// taken (`notes.md` → `notes (1).md`; a name without extension, or a dotfile, gets the
    /// number at its end).
    pub fn numbered(&self, n: impl fmt::Display) -> String {
        match self.0.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => format!("{stem} ({n}).{ext}"),
            _ => format!("{} ({n})", self.0),
        }
    }

    /// The names to try, in order, for an object that would be called this: itself, then
    /// `stem (1).ext` up to `(999)` while they are valid names, then one with a random number
    /// (so a free one is always found).
    pub fn candidates(&self) -> impl Iterator<Item = ObjectName> + '_ {
        let numbered = (1..=999_u32).map_while(|n| ObjectName::parse(&self.numbered(n)).ok());
        let stem: String = self.0.chars().take(200).collect();
        let random = ObjectName(format!("{stem} ({})", uuid::Uuid::new_v4().simple()));
        std::iter::once(self.clone()).chain(numbered).chain(std::iter::once(random))
    }

    /// The extension without the dot, lower-cased (`""` when none).
    pub fn extension(&self) -> String {
        match self.0.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => ext.to_lowercase(),
            _ => String::new(),
        }
    }
}

/// The 66 Unicode noncharacters: U+FDD0..=U+FDEF and the last two code points of every plane.
fn is_noncharacter(c: char) -> bool {
    matches!(c, '\u{FDD0}'..='\u{FDEF}') || (c as u32 & 0xFFFE) == 0xFFFE
}

/// Explicit bidirectional embeddings, overrides, isolates and marks (Unicode Bidi_Control).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A new id for an object or a blob: time-ordered (UUIDv7), so the indexes keyed by these ids
/// grow at one end and a new row's index entry lands on a page that was just used (random ids
/// put each one on a random page, which the database must read and write back).
pub fn new_id() -> uuid::Uuid {
    uuid::Uuid::now_v7()
}

/// The form of a name (or of a search for one) that searches and automatic tags compare: lower
/// case by Unicode's rules (`Ä` and `ä` alike, not only A-Z) and composed (NFC), so a name a
/// client sent decomposed (`a` + combining diaeresis, as macOS does) matches one typed composed.
pub fn search_key(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    text.nfc().collect::<String>().to_lowercase()
}

/// Splits a slash-separated path relative to a user's root into validated names; `""` and `"/"`
/// are the root itself.
pub fn parse_path(path: &str) -> Result<Vec<ObjectName>, &'static str> {
    path.split('/').filter(|s| !s.is_empty()).map(ObjectName::parse).collect()
}

/// Sort orders of a folder listing; folders always come first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOrder {
    Name,
    Size,
    CreatedAt,
    UpdatedAt,
}

#[cfg(test)]
mod tests {

    #[test]
    fn new_ids_sort_in_the_order_they_were_made() {
        let ids: Vec<String> = (0..2000).map(|_| super::new_id().to_string()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "each id sorts after the one before");
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "no id repeats");
    }
    use super::*;

    #[test]
    fn search_keys_fold_case_and_composition() {
        assert_eq!(search_key("ÄRGER.TXT"), "ärger.txt");
        assert_eq!(search_key("A\u{0308}rger"), search_key("Ärger"));
        assert_eq!(search_key("ΣΟΦΙΑ"), "σοφια");
        assert_ne!(search_key("ärger"), search_key("arger"));
    }

    #[test]
    fn ordinary_and_unusual_names_are_accepted() {
        for name in [
            "a",
            "report.pdf",
            ".hidden",
            "...",
            "名前 with spaces",
            " leading",
            "trailing tab is a control, trailing dot is fine.",
            "\u{FFFD} replacement and \u{FDCF} \u{FDF0} \u{FFFD} neighbours",
            "zero\u{200B}width",
            "emoji 👍🏽",
            "x".repeat(255).as_str(),
            "ü".repeat(127).as_str(),
        ] {
            assert!(ObjectName::parse(name).is_ok(), "{name:?} refused");
        }
    }

    #[test]
    fn invalid_names_are_refused() {
        for name in [
            "",
            ".",
            "..",
            "a/b",
            "/",
            "a\0b",
            "x".repeat(256).as_str(),
            "ü".repeat(128).as_str(),
            "line\nbreak",
            "tab\there",
            "bell\u{7}",
            "del\u{7f}",
            "c1\u{85}",
            "invoice\u{202E}fdp.exe",
            "isolate\u{2066}x",
            "mark\u{200F}",
            " ",
            "   ",
            "\u{3000}\u{a0}",
            "trailing ",
            " leading and trailing ",
            "a\\b",
            "\\",
            "non\u{FFFE}char",
            "non\u{FFFF}",
            "\u{FDD0}",
            "plane\u{10FFFF}",
            "plane\u{1FFFE}",
        ] {
            assert!(ObjectName::parse(name).is_err(), "{name:?} accepted");
        }
    }

    #[test]
    fn numbered_names_keep_the_extension() {
        let numbered = |name: &str, n| ObjectName::parse(name).unwrap().numbered(n);
        assert_eq!(numbered("Notes.md", 1), "Notes (1).md");
        assert_eq!(numbered("archive.tar.gz", 2), "archive.tar (2).gz");
        assert_eq!(numbered("README", 3), "README (3)");
        assert_eq!(numbered(".bashrc", 1), ".bashrc (1)");
    }

    #[test]
    fn extensions_are_lower_case_and_dotfiles_have_none() {
        assert_eq!(ObjectName::parse("Photo.JPG").unwrap().extension(), "jpg");
        assert_eq!(ObjectName::parse(".bashrc").unwrap().extension(), "");
        assert_eq!(ObjectName::parse("archive.tar.gz").unwrap().extension(), "gz");
        assert_eq!(ObjectName::parse("README").unwrap().extension(), "");
    }

    #[test]
    fn paths_split_into_names() {
        let names: Vec<String> = parse_path("/a/b c/").unwrap().iter().map(|n| n.to_string()).collect();
        assert_eq!(names, vec!["a", "b c"]);
        assert!(parse_path("").unwrap().is_empty());
        assert!(parse_path("/a/../b").is_err());
    }
}
