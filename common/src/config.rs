//! The configuration layering both programs use: built-in defaults, then a TOML file, then
//! `NUBO_*` environment variables (only the listed keys), then command-line flags.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Loads `T` from its `Default`, the TOML `file` (if any, which must exist), the `NUBO_<KEY>`
/// variables named by `env_keys`, and `cli` (fields it leaves out keep the lower layers).
pub fn load_layered<T, C>(file: Option<&Path>, env_keys: &[&str], cli: &C) -> Result<T, Box<figment::Error>>
where
    T: Default + Serialize + DeserializeOwned,
    C: Serialize,
{
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    if let Some(path) = file {
        figment = figment.merge(Toml::file_exact(path));
    }
    figment.merge(Env::prefixed("NUBO_").only(env_keys)).merge(Serialized::defaults(cli)).extract().map_err(Box::new)
}
