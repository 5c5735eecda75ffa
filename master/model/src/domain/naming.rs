//! Storage-key naming rules: templates with placeholders such as `{uid}/{date}` for folders and
//! `{uuid}_{originname}` for files, rendered into keys that stay inside the policy root
//! whatever the user called the file.

use rand::Rng;
use rand::distr::Alphanumeric;
use time::OffsetDateTime;
use uuid::Uuid;

/// Placeholders a naming rule may use.
pub const PLACEHOLDERS: &[&str] = &[
    "{uid}",
    "{uuid}",
    "{randomkey8}",
    "{randomkey16}",
    "{date}",
    "{timestamp}",
    "{year}",
    "{month}",
    "{day}",
    "{hour}",
    "{minute}",
    "{originname}",
    "{ext}",
];

/// Placeholders that make every rendering different, so two uploads never share a key.
const UNIQUE_PLACEHOLDERS: &[&str] = &["{uuid}", "{randomkey8}", "{randomkey16}"];

/// Longest rendered segment in bytes (file systems allow 255; leave room for suffixes).
const MAX_SEGMENT_BYTES: usize = 200;

/// What a rendering knows about the upload.
pub struct NamingContext<'a> {
    pub user_id: Uuid,
    pub original_name: &'a str,
    pub now: OffsetDateTime,
}

fn random_key(len: usize) -> String {
    rand::rng().sample_iter(&Alphanumeric).take(len).map(char::from).collect()
}

/// Renders `template` in one pass from left to right: each placeholder becomes its value, and
/// a value (the original name, say) is never read again for placeholders. Only the values the
/// template names are computed.
fn render(template: &str, ctx: &NamingContext<'_>) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        let placeholder = tail.find('}').map(|close| &tail[..=close]);
        match placeholder.and_then(|placeholder| Some((placeholder.len(), value_of(placeholder, ctx)?))) {
            Some((len, value)) => {
                out.push_str(&value);
                rest = &tail[len..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of one of the [`PLACEHOLDERS`] (with its braces); `None` for anything else.
fn value_of(placeholder: &str, ctx: &NamingContext<'_>) -> Option<String> {
    let now = ctx.now;
    let extension = || match ctx.original_name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext,
        _ => "",
    };
    Some(match placeholder {
        "{uid}" => ctx.user_id.simple().to_string(),
        "{uuid}" => Uuid::new_v4().simple().to_string(),
        "{randomkey8}" => random_key(8),
        "{randomkey16}" => random_key(16),
        "{date}" => format!("{:04}-{:02}-{:02}", now.year(), u8::from(now.month()), now.day()),
        "{timestamp}" => now.unix_timestamp().to_string(),
        "{year}" => format!("{:04}", now.year()),
        "{month}" => format!("{:02}", u8::from(now.month())),
        "{day}" => format!("{:02}", now.day()),
        "{hour}" => format!("{:02}", now.hour()),
        "{minute}" => format!("{:02}", now.minute()),
        "{originname}" => ctx.original_name.to_owned(),
        "{ext}" => extension().to_owned(),
        _ => return None,
    })
}

/// Makes one rendered path segment safe: `/`, `\`, NUL and control characters become `_`, a
/// segment of dots becomes `_`, and it is cut to [`MAX_SEGMENT_BYTES`] on a character boundary.
fn sanitize_segment(segment: &str) -> String {
    let mut clean: String =
        segment.chars().map(|c| if c == '/' || c == '\\' || c == '\0' || c.is_control() { '_' } else { c }).collect();
    if clean.chars().all(|c| c == '.') {
        clean = "_".to_owned();
    }
    if clean.len() > MAX_SEGMENT_BYTES {
        let mut cut = MAX_SEGMENT_BYTES;
        while !clean.is_char_boundary(cut) {
            cut -= 1;
        }
        clean.truncate(cut);
    }
    clean
}

/// Renders the folder and file rules into a storage key. The folder rule's `/` separate
/// segments; values from the user (the original name) can never add a segment. A file rule
/// without a unique placeholder gets `{uuid}_` in front, so keys never collide.
pub fn storage_key(dir_rule: &str, file_rule: &str, ctx: &NamingContext<'_>) -> String {
    let file_rule = if UNIQUE_PLACEHOLDERS.iter().any(|p| file_rule.contains(p)) {
        file_rule.to_owned()
    } else {
        format!("{{uuid}}_{file_rule}")
    };
    let mut segments: Vec<String> = dir_rule
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|rule| sanitize_segment(&render(rule, ctx)))
        .filter(|s| !s.is_empty())
        .collect();
    let file = sanitize_segment(&render(&file_rule, ctx));
    segments.push(if file.is_empty() { Uuid::new_v4().simple().to_string() } else { file });
    segments.join("/")
}

/// Checks a rule: only known placeholders, no absolute path.
pub fn validate_rule(rule: &str) -> Result<(), String> {
    if rule.starts_with('/') {
        return Err("a naming rule may not start with /".to_owned());
    }
    let mut rest = rule;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err("unclosed { in naming rule".to_owned());
        };
        let placeholder = &rest[open..open + close + 1];
        if !PLACEHOLDERS.contains(&placeholder) {
            return Err(format!("unknown placeholder {placeholder}"));
        }
        rest = &rest[open + close + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn ctx(name: &str) -> NamingContext<'_> {
        NamingContext { user_id: Uuid::nil(), original_name: name, now: datetime!(2026-11-22 04:35:09 UTC) }
    }

    #[test]
    fn placeholders_are_rendered() {
        let key = storage_key(
            "{uid}/{date}/{year}{month}{day}-{hour}{minute}",
            "{timestamp}_{randomkey8}.{ext}",
            &ctx("photo.JPG"),
        );
        let parts: Vec<&str> = key.split('/').collect();
        assert_eq!(parts[0], "00000000000000000000000000000000");
        assert_eq!(parts[1], "2026-11-22");
        assert_eq!(parts[2], "20261122-0435");
        assert!(parts[3].starts_with("1795322109_") && parts[3].ends_with(".JPG"), "{key}");
    }

    #[test]
    fn original_names_cannot_escape_or_add_segments() {
        for evil in ["../../etc/passwd", "..", "a/b/c", "x\\..\\y", "/abs", "nul\0byte", "new\nline"] {
            let key = storage_key("{uid}", "{originname}", &ctx(evil));
            let parsed = nubo_common::storage::StorageKey::parse(&key);
            assert!(parsed.is_ok(), "{evil:?} gave invalid key {key:?}");
            assert_eq!(key.split('/').count(), 2, "{evil:?} added segments: {key:?}");
        }
    }

    #[test]
    fn an_original_name_that_looks_like_a_placeholder_is_kept_as_it_is() {
        let key = storage_key("{uid}", "{originname}-{ext}", &ctx("a{ext}{uuid}{nope}.bin"));
        let file = key.rsplit('/').next().unwrap();
        let (unique, rest) = file.split_once('_').unwrap();
        assert_eq!(unique.len(), 32, "the {{uuid}} put in front: {key}");
        assert_eq!(rest, "a{ext}{uuid}{nope}.bin-bin", "{key}");
    }

    #[test]
    fn rules_without_a_unique_part_get_one() {
        let a = storage_key("files", "{originname}", &ctx("same.txt"));
        let b = storage_key("files", "{originname}", &ctx("same.txt"));
        assert_ne!(a, b);
        assert!(a.ends_with("_same.txt"));
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        let name = "ü".repeat(200);
        let key = storage_key("d", "{uuid}{originname}", &ctx(&name));
        let file = key.rsplit('/').next().unwrap();
        assert!(file.len() <= MAX_SEGMENT_BYTES);
    }

    #[test]
    fn rules_are_validated() {
        assert!(validate_rule("{uid}/{date}").is_ok());
        assert!(validate_rule("{uuid}_{originname}").is_ok());
        assert!(validate_rule("/root/{uid}").is_err());
        assert!(validate_rule("{user}").is_err());
        assert!(validate_rule("{uid").is_err());
    }
}
