//! Secret strings (signing keys, passwords): never printed, loadable from a `*_FILE` path.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A secret value whose `Debug` and `Display` never reveal it, so it cannot leak into logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call only where the bytes are really needed (hashing, signing).
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Reads a secret from a file, as `NUBO_SECRET_FILE` and friends do. Surrounding whitespace
    /// (a trailing newline from `echo` or an editor) is not part of the secret.
    pub fn from_file(path: &Path) -> Result<Self, SecretFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SecretFileError { path: path.display().to_string(), source })?;
        Ok(Self(text.trim().to_owned()))
    }
}

/// Fills an unset secret from its `*_FILE` setting: a value given directly wins over a file.
pub fn fill_from_file(secret: &mut Option<Secret>, file: Option<&Path>) -> Result<(), SecretFileError> {
    if secret.is_none()
        && let Some(path) = file
    {
        *secret = Some(Secret::from_file(path)?);
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
#[error("cannot read secret file {path}: {source}")]
pub struct SecretFileError {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

/// Serialises to the real value: needed to layer configuration sources; never serialise a
/// configuration into a log or an API answer.
impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let secret = Secret::new("hunter2-hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(format!("{secret}"), "***");
    }

    #[test]
    fn file_secret_is_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "  abc def \n").unwrap();
        assert_eq!(Secret::from_file(&path).unwrap().expose(), "abc def");
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = Secret::from_file(Path::new("/nonexistent/nubo-secret")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/nubo-secret"));
    }
}
