//! The state of one sync pair: a small SQLite file holding, per relative path, the last version
//! both sides agreed on (the base of the three-way reconcile), and the change-event cursor. Each
//! agreement is written as soon as it is reached, so a run cut short at any point resumes from
//! what was really done.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{CliError, CliResult, ExitKind};

/// A file or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Folder,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Folder => "folder",
        }
    }

    pub fn parse(raw: &str) -> Kind {
        if raw == "folder" { Kind::Folder } else { Kind::File }
    }
}

/// The last version of a path both sides agreed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub kind: Kind,
    /// blake3 of a file's content (hex); `None` for folders.
    pub blake3: Option<String>,
    pub size: u64,
    /// The local file's modification time then (ns since the epoch): unchanged size and time
    /// mean unchanged content, without reading it.
    pub mtime_ns: i64,
    pub remote_id: String,
    pub remote_updated_at: String,
}

/// What a pair's state says of itself, read without taking its lock (see [`known_pairs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownPair {
    pub server: String,
    pub user_id: String,
    pub root: String,
    pub folder_id: String,
    /// Where its remote folder was when it last ran (`None` from states older than this record).
    pub remote_path: Option<String>,
    /// Whether anything was ever agreed.
    pub has_bases: bool,
}

/// The key naming a pair's state (see [`State::open`]).
pub fn pair_key(server: &str, user_id: &str, root: &str, folder_id: &str) -> String {
    format!("{server}\n{user_id}\n{root}\n{folder_id}")
}

/// Every pair with a state on this machine, read-only (a pair running now is read as it is).
/// States that cannot be read are left out: this is advice for messages, never a plan's input.
pub fn known_pairs() -> Vec<KnownPair> {
    let Ok(entries) =
        state_dir().and_then(|dir| std::fs::read_dir(&dir).map_err(|err| CliError::local("cannot read", &dir, err)))
    else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sqlite"))
        .filter_map(|path| read_known(&path).ok().flatten())
        .collect()
}

fn read_known(file: &Path) -> rusqlite::Result<Option<KnownPair>> {
    let connection = Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let meta = |key: &str| {
        connection
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |row| row.get::<_, String>(0))
            .optional()
    };
    let Some(key) = meta("pair")? else { return Ok(None) };
    // The root sits between the account and the folder id and may itself hold a line break.
    let mut head = key.splitn(3, '\n');
    let (Some(server), Some(user_id), Some(rest)) = (head.next(), head.next(), head.next()) else { return Ok(None) };
    let Some((root, folder_id)) = rest.rsplit_once('\n') else { return Ok(None) };
    let has_bases = connection.query_row("SELECT EXISTS (SELECT 1 FROM base)", [], |row| row.get::<_, bool>(0))?;
    Ok(Some(KnownPair {
        server: server.to_owned(),
        user_id: user_id.to_owned(),
        root: root.to_owned(),
        folder_id: folder_id.to_owned(),
        remote_path: meta("remote_path")?,
        has_bases,
    }))
}

/// The open state file of one pair, held by this process alone.
pub struct State {
    connection: Connection,
    /// Locked while the state is open: two runs of one pair at once would undo each other.
    _lock: std::fs::File,
}

fn failed(err: rusqlite::Error) -> CliError {
    CliError::new(ExitKind::Failed, format!("the sync state database failed: {err}"))
}

/// `$XDG_DATA_HOME/nubo/sync`, else the platform's data directory (`~/.local/share/nubo/sync`).
pub fn state_dir() -> CliResult<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(dirs::data_dir)
        .ok_or_else(|| CliError::new(ExitKind::Failed, "no data directory: set XDG_DATA_HOME or HOME"))?;
    Ok(base.join("nubo").join("sync"))
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS base (
    path TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL,
    blake3 TEXT,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    remote_id TEXT NOT NULL,
    remote_updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
";

/// `path` and everything below it, as a SQL condition on `path` (parameter 1).
const AT_OR_BELOW: &str = "(path = ?1 OR substr(path, 1, length(?1) + 1) = ?1 || '/')";

impl State {
    /// The state of the pair named by `key` (server, account, local folder, remote folder id),
    /// made on first use.
    pub fn open(key: &str) -> CliResult<State> {
        let dir = state_dir()?;
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|err| CliError::local("cannot create", &dir, err))?;
        let digest = blake3::hash(key.as_bytes()).to_hex();
        let file = dir.join(format!("{}.sqlite", &digest[..32]));
        Self::open_file(&file, key)
    }

    pub fn open_file(file: &Path, key: &str) -> CliResult<State> {
        let lock_path = file.with_extension("lock");
        let lock =
            std::fs::File::create(&lock_path).map_err(|err| CliError::local("cannot create", &lock_path, err))?;
        if lock.try_lock().is_err() {
            return Err(CliError::conflict("another `nubo sync` of this pair is running")
                .with_hint("wait for it to finish, or stop it first"));
        }
        let connection = Connection::open(file).map_err(failed)?;
        // WAL: each agreement is one short commit that survives a killed process.
        connection
            .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;")
            .map_err(failed)?;
        connection.execute_batch(SCHEMA).map_err(failed)?;
        connection
            .execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('pair', ?1)", params![key])
            .map_err(failed)?;
        Ok(State { connection, _lock: lock })
    }

    /// Every agreed path.
    pub fn bases(&self) -> CliResult<BTreeMap<String, Base>> {
        let mut statement = self
            .connection
            .prepare("SELECT path, kind, blake3, size, mtime_ns, remote_id, remote_updated_at FROM base")
            .map_err(failed)?;
        let rows = statement
            .query_map([], |row| {
                let kind: String = row.get(1)?;
                Ok((
                    row.get::<_, String>(0)?,
                    Base {
                        kind: Kind::parse(&kind),
                        blake3: row.get(2)?,
                        size: row.get::<_, i64>(3)? as u64,
                        mtime_ns: row.get(4)?,
                        remote_id: row.get(5)?,
                        remote_updated_at: row.get(6)?,
                    },
                ))
            })
            .map_err(failed)?;
        rows.collect::<Result<BTreeMap<_, _>, _>>().map_err(failed)
    }

    pub fn agree(&self, path: &str, base: &Base) -> CliResult<()> {
        self.connection
            .execute(
                "INSERT INTO base (path, kind, blake3, size, mtime_ns, remote_id, remote_updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (path) DO UPDATE SET kind = excluded.kind, blake3 = excluded.blake3,
                   size = excluded.size, mtime_ns = excluded.mtime_ns, remote_id = excluded.remote_id,
                   remote_updated_at = excluded.remote_updated_at",
                params![
                    path,
                    base.kind.as_str(),
                    base.blake3,
                    base.size as i64,
                    base.mtime_ns,
                    base.remote_id,
                    base.remote_updated_at
                ],
            )
            .map_err(failed)?;
        Ok(())
    }

    /// Forgets `path` and everything below it (gone on both sides).
    pub fn forget(&self, path: &str) -> CliResult<()> {
        self.connection.execute(&format!("DELETE FROM base WHERE {AT_OR_BELOW}"), params![path]).map_err(failed)?;
        Ok(())
    }

    /// Moves the agreement of `from` and everything below it to `to` (a move both sides made).
    pub fn rename(&self, from: &str, to: &str) -> CliResult<()> {
        let transaction = self.connection.unchecked_transaction().map_err(failed)?;
        transaction.execute(&format!("DELETE FROM base WHERE {AT_OR_BELOW}"), params![to]).map_err(failed)?;
        transaction
            .execute(
                &format!("UPDATE base SET path = ?2 || substr(path, length(?1) + 1) WHERE {AT_OR_BELOW}"),
                params![from, to],
            )
            .map_err(failed)?;
        transaction.commit().map_err(failed)
    }

    fn meta(&self, key: &str) -> CliResult<Option<String>> {
        self.connection
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |row| row.get::<_, String>(0))
            .optional()
            .map_err(failed)
    }

    fn set_meta(&self, key: &str, value: &str) -> CliResult<()> {
        self.connection
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(failed)?;
        Ok(())
    }

    pub fn cursor(&self) -> CliResult<Option<i64>> {
        Ok(self.meta("cursor")?.and_then(|v| v.parse().ok()))
    }

    pub fn set_cursor(&self, cursor: i64) -> CliResult<()> {
        self.set_meta("cursor", &cursor.to_string())
    }

    /// Whether the last run that set the cursor was a two-way run that left both sides wholly in
    /// step: every remote path then has its agreement here.
    pub fn in_step(&self) -> CliResult<bool> {
        Ok(self.meta("in_step")?.as_deref() == Some("1"))
    }

    pub fn set_in_step(&self, in_step: bool) -> CliResult<()> {
        self.set_meta("in_step", if in_step { "1" } else { "0" })
    }

    /// The server's epoch when the agreements were made (see `scan::ServerSince`).
    pub fn server_epoch(&self) -> CliResult<Option<String>> {
        self.meta("server_epoch")
    }

    pub fn set_server_epoch(&self, epoch: &str) -> CliResult<()> {
        self.set_meta("server_epoch", epoch)
    }

    /// Forgets every agreement (the server forgot them: see `scan::ServerSince`).
    pub fn forget_all(&self) -> CliResult<()> {
        self.connection.execute("DELETE FROM base", []).map_err(failed)?;
        Ok(())
    }

    /// Where the remote folder was when the pair last ran (its path from the user's root).
    pub fn set_remote_path(&self, path: &str) -> CliResult<()> {
        self.set_meta("remote_path", path)
    }

    /// The file system the local folder was on when the agreements were made (see `guard`).
    pub fn root_device(&self) -> CliResult<Option<String>> {
        self.meta("root_device")
    }

    pub fn set_root_device(&self, device: &str) -> CliResult<()> {
        self.set_meta("root_device", device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(id: &str) -> Base {
        Base {
            kind: Kind::File,
            blake3: Some("h".into()),
            size: 1,
            mtime_ns: 2,
            remote_id: id.into(),
            remote_updated_at: "t".into(),
        }
    }

    #[test]
    fn agreements_are_kept_renamed_below_a_folder_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let state = State::open_file(&dir.path().join("s.sqlite"), "pair").unwrap();
        state.agree("a", &Base { kind: Kind::Folder, blake3: None, ..base("1") }).unwrap();
        state.agree("a/x.txt", &base("2")).unwrap();
        state.agree("ab.txt", &base("3")).unwrap();
        state.rename("a", "b/c").unwrap();
        let paths: Vec<String> = state.bases().unwrap().into_keys().collect();
        assert_eq!(paths, ["ab.txt", "b/c", "b/c/x.txt"], "a sibling sharing the prefix stays");
        assert_eq!(state.bases().unwrap()["b/c/x.txt"], base("2"));
        state.forget("b/c").unwrap();
        assert_eq!(state.bases().unwrap().len(), 1);
        assert_eq!(state.cursor().unwrap(), None);
        state.set_cursor(42).unwrap();
        assert_eq!(state.cursor().unwrap(), Some(42));
        assert!(State::open_file(&dir.path().join("s.sqlite"), "pair").is_err(), "one run of a pair at a time");
    }

    #[test]
    fn a_state_tells_its_pair_without_being_locked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.sqlite");
        let key = pair_key("http://nubo", "u-1", "/home/me/odd\nname", "f-1");
        let state = State::open_file(&file, &key).unwrap();
        let known = read_known(&file).unwrap().unwrap();
        assert_eq!((known.root.as_str(), known.folder_id.as_str()), ("/home/me/odd\nname", "f-1"));
        assert_eq!((known.remote_path, known.has_bases), (None, false));
        state.set_remote_path("/sync").unwrap();
        state.agree("a", &base("1")).unwrap();
        let known = read_known(&file).unwrap().unwrap();
        assert_eq!((known.remote_path.as_deref(), known.has_bases), (Some("/sync"), true), "read while held");
    }
}
