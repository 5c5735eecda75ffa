//! The client's files in the user's config directory (`$XDG_CONFIG_HOME/nubo`): the signed-in
//! session (`credentials.json`, mode 0600, with `credentials.lock` serialising refreshes) and the resume records of interrupted transfers
//! (`resume/`). Every file is written to a private temporary file and renamed into place, so
//! none is ever readable by others or seen half-written.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{CliError, CliResult, ExitKind};

/// `$XDG_CONFIG_HOME/nubo`, else the platform's config directory (`~/.config/nubo` on Linux).
pub fn config_dir() -> CliResult<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(dirs::config_dir)
        .ok_or_else(|| CliError::new(ExitKind::Failed, "no config directory: set XDG_CONFIG_HOME or HOME"))?;
    Ok(base.join("nubo"))
}

/// A signed-in session with one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Credentials {
    /// The server's base URL, without `/api/v1`.
    pub server: String,
    pub email: String,
    pub user_id: String,
    pub access_token: String,
    /// Unix seconds.
    pub access_expires: i64,
    pub refresh_token: String,
    /// Unix seconds.
    pub refresh_expires: i64,
}

fn credentials_path() -> CliResult<PathBuf> {
    Ok(config_dir()?.join("credentials.json"))
}

impl Credentials {
    /// The stored session, `None` when nobody is signed in.
    pub fn load() -> CliResult<Option<Credentials>> {
        let path = credentials_path()?;
        read_json(&path)
    }

    pub fn save(&self) -> CliResult<()> {
        write_private_json(&credentials_path()?, self)
    }

    /// Holds the session for one refresh across every `nubo` process of this user (an exclusive
    /// lock on `credentials.lock`, released when the answer is dropped): a refresh token used
    /// twice ends the session on the server, so two processes must never trade the same one.
    pub async fn lock_for_refresh() -> CliResult<std::fs::File> {
        let dir = config_dir()?;
        create_private_dir(&dir)?;
        let path = dir.join("credentials.lock");
        let locked = tokio::task::spawn_blocking(move || {
            let mut options = std::fs::OpenOptions::new();
            options.create(true).truncate(false).write(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let file = options.open(&path).map_err(|err| CliError::local("cannot open", &path, err))?;
            file.lock().map_err(|err| CliError::local("cannot lock", &path, err))?;
            Ok(file)
        });
        locked.await.map_err(|err| CliError::new(ExitKind::Failed, format!("the session lock failed: {err}")))?
    }

    /// Forgets the session; answers whether there was one.
    pub fn remove() -> CliResult<bool> {
        let path = credentials_path()?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(CliError::local("cannot remove", &path, err)),
        }
    }
}

/// Reads a JSON file; `None` when it does not exist. A file that does not parse counts as
/// absent (a record from another version is simply not resumed).
pub fn read_json<T: DeserializeOwned>(path: &Path) -> CliResult<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(CliError::local("cannot read", path, err)),
    }
}

/// Writes `value` as JSON to `path`, readable and writable by the user alone from its first
/// byte on: a fresh temporary file created with mode 0600 in the same directory (itself 0700),
/// then renamed over `path`.
pub fn write_private_json<T: Serialize>(path: &Path, value: &T) -> CliResult<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| CliError::new(ExitKind::Failed, e.to_string()))?;
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(&bytes)?;
        file.sync_all()
    });
    if let Err(err) = written.and_then(|()| std::fs::rename(&temporary, path)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(CliError::local("cannot write", path, err));
    }
    Ok(())
}

fn create_private_dir(dir: &Path) -> CliResult<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|err| CliError::local("cannot create", dir, err))
}

/// Where the record of one interrupted transfer lives: `resume/{kind}-{blake3 of key}.json`.
/// One small file per transfer, so parallel transfers (and processes) never share a file.
pub fn resume_record_path(kind: &str, key: &str) -> CliResult<PathBuf> {
    let digest = blake3::hash(key.as_bytes()).to_hex();
    Ok(config_dir()?.join("resume").join(format!("{kind}-{}.json", &digest[..32])))
}

/// Drops a resume record once its transfer finished (a missing record is fine).
pub fn remove_record(path: &Path) {
    let _ = std::fs::remove_file(path);
}
