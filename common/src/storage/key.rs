//! Storage keys: relative, `/`-separated paths that can never leave the driver's root.

use std::fmt;

use super::StorageError;

/// A validated storage key: non-empty `/`-separated segments, none empty, `.` or `..`, no NUL,
/// no backslash, no control characters, not starting with `/`, at most 1024 bytes. Whatever a
/// user named a file, a key built from it stays inside the policy root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StorageKey(String);

impl StorageKey {
    pub fn parse(raw: &str) -> Result<Self, StorageError> {
        let invalid = || StorageError::InvalidKey(raw.to_owned());
        if raw.is_empty() || raw.len() > 1024 || raw.starts_with('/') {
            return Err(invalid());
        }
        for segment in raw.split('/') {
            if segment.is_empty() || segment == "." || segment == ".." {
                return Err(invalid());
            }
            if segment.chars().any(|c| c == '\\' || c == '\0' || c.is_control()) {
                return Err(invalid());
            }
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StorageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_relative_keys_are_accepted() {
        for key in ["a", "a/b/c.txt", "2026/11/22/uuid_file name.bin", "日本/ファイル.txt"] {
            assert_eq!(StorageKey::parse(key).unwrap().as_str(), key);
        }
    }

    #[test]
    fn escaping_or_odd_keys_are_refused() {
        for key in ["", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", "a\\b", "a\0b", "a\nb", "..", "."] {
            assert!(StorageKey::parse(key).is_err(), "{key:?} accepted");
        }
        assert!(StorageKey::parse(&"a".repeat(1025)).is_err());
    }
}
