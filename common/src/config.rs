//! The configuration loader both programs use: built-in defaults, then a TOML file, then
//! `NUBO_*` environment variables (only the listed keys), then command-line flags, then each
//! `*_FILE` secret read. It knows no program's settings: each names its own in [`Layered`].

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::secret::{Secret, SecretFileError, fill_from_file};

/// A program's typed configuration, as the loader layers it.
pub trait Layered: Default + Serialize + DeserializeOwned {
    /// The keys read from the environment as `NUBO_<KEY>`; other `NUBO_` variables (the config
    /// path itself, test switches) are not settings.
    const ENV_KEYS: &'static [&'static str];

    /// Each secret with the file that fills it when it is unset (`secret` and `secret_file`).
    fn secret_files(&mut self) -> Vec<(&mut Option<Secret>, Option<&Path>)>;
}

/// Why a configuration could not be loaded; each program's own error wraps it unchanged.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("invalid configuration: {0}")]
    Invalid(#[from] Box<figment::Error>),
    #[error(transparent)]
    SecretFile(#[from] SecretFileError),
}

/// Loads `T` from every layer and reads its secret files (see [`load_layered`] and
/// [`read_secret_files`]). Demands no secret: a program asks for those where it needs them.
pub fn load<T: Layered, C: Serialize>(file: Option<&Path>, cli: &C) -> Result<T, LoadError> {
    let mut config: T = load_layered(file, cli)?;
    read_secret_files(&mut config)?;
    Ok(config)
}

/// Loads `T` from its `Default`, the TOML `file` (if any, which must exist), the `NUBO_<KEY>`
/// variables named by [`Layered::ENV_KEYS`], and `cli` (fields it leaves out keep the lower
/// layers). Secret files are not read yet.
pub fn load_layered<T: Layered, C: Serialize>(file: Option<&Path>, cli: &C) -> Result<T, LoadError> {
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    if let Some(path) = file {
        figment = figment.merge(Toml::file_exact(path));
    }
    let figment = figment.merge(Env::prefixed("NUBO_").only(T::ENV_KEYS)).merge(Serialized::defaults(cli));
    Ok(figment.extract().map_err(Box::new)?)
}

/// Fills every unset secret of `config` from its file: a value given directly wins.
pub fn read_secret_files<T: Layered>(config: &mut T) -> Result<(), LoadError> {
    for (secret, file) in config.secret_files() {
        fill_from_file(secret, file)?;
    }
    Ok(())
}

/// The secret when it is set and not empty: an empty value given directly (to switch a feature
/// off, or by mistake) counts as unset.
pub fn given(secret: &Option<Secret>) -> Option<&Secret> {
    secret.as_ref().filter(|secret| !secret.is_empty())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde::Deserialize;

    use super::*;

    /// A program's configuration in miniature: one plain setting, one secret with its file.
    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Toy {
        greeting: String,
        token: Option<Secret>,
        token_file: Option<PathBuf>,
    }

    impl Layered for Toy {
        const ENV_KEYS: &'static [&'static str] = &["greeting", "token", "token_file"];

        fn secret_files(&mut self) -> Vec<(&mut Option<Secret>, Option<&Path>)> {
            vec![(&mut self.token, self.token_file.as_deref())]
        }
    }

    #[derive(Serialize)]
    struct NoFlags {}

    #[test]
    fn the_file_is_layered_over_the_defaults_and_names_the_secret_file() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "  from-file\n").unwrap();
        let file = dir.path().join("toy.toml");
        std::fs::write(&file, format!("greeting = \"hello\"\ntoken_file = {:?}\n", token.display().to_string()))
            .unwrap();
        let toy: Toy = load(Some(&file), &NoFlags {}).unwrap();
        assert_eq!(toy.greeting, "hello");
        assert_eq!(given(&toy.token).map(Secret::expose), Some("from-file"));
    }

    #[test]
    fn unknown_keys_and_unreadable_secret_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("toy.toml");
        std::fs::write(&file, "greting = \"typo\"\n").unwrap();
        let err = load::<Toy, _>(Some(&file), &NoFlags {}).unwrap_err();
        assert!(matches!(err, LoadError::Invalid(_)) && err.to_string().starts_with("invalid configuration: "));
        std::fs::write(&file, "token_file = \"/nonexistent/nubo-token\"\n").unwrap();
        let err = load::<Toy, _>(Some(&file), &NoFlags {}).unwrap_err();
        assert!(matches!(err, LoadError::SecretFile(_)) && err.to_string().contains("/nonexistent/nubo-token"));
    }

    #[test]
    fn an_empty_secret_counts_as_unset() {
        assert!(given(&Some(Secret::new(""))).is_none());
        assert!(given(&None).is_none());
        assert_eq!(given(&Some(Secret::new("x"))).map(Secret::expose), Some("x"));
    }
}
