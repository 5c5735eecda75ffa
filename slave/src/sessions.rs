//! Upload sessions on this node and their chunk receipts, persisted as small JSON files so a
//! restart keeps them: `<sessions>/<id>.json` holds the session, `<sessions>/<id>.chunks/<i>.json`
//! one receipt per chunk (one file each, so parallel chunks never race on a shared file). Owns
//! only that directory; the bytes are the blob store's.

use std::io;
use std::path::{Path, PathBuf};

use nubo_common::storage::{ChunkReceipt, StagedUpload};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::fs;

/// Longest session id accepted: ids are the master's (a UUID fits easily).
const MAX_SESSION_ID_LEN: usize = 128;

/// Session ids name files: 1 to 128 of `A-Z a-z 0-9 _ -`, so no id can leave the directory.
pub fn valid_session_id(id: &str) -> bool {
    (1..=MAX_SESSION_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What the node remembers about one upload session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub session_id: String,
    /// The staged upload the blob store began.
    pub staged: StagedUpload,
    /// Unix seconds after which the master reaps the session.
    pub expires_at: u64,
    /// Set once the blob is in place at its key.
    pub completed: bool,
    /// The master's answer to the completion report, once it acknowledged it: `Ok` holds the
    /// body for the client (the created file), `Err` the master's refusal. `None` while the
    /// report is pending.
    #[serde(default)]
    pub outcome: Option<ReportOutcome>,
}

/// How the master answered a completion report, as relayed to the uploading client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportOutcome {
    /// HTTP status for the client: 200 when the file was created.
    pub status: u16,
    /// JSON body for the client.
    pub body: serde_json::Value,
}

/// The session files under one directory.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn chunks_dir(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.chunks"))
    }

    /// The session `id`, or `None` when there is none. Callers validate `id` first.
    pub async fn load(&self, id: &str) -> io::Result<Option<SessionRecord>> {
        read_json(&self.record_path(id)).await
    }

    pub async fn save(&self, record: &SessionRecord) -> io::Result<()> {
        write_json(&self.record_path(&record.session_id), record, true).await
    }

    /// Every session record (for the restart scan and the sweeper); unreadable files are skipped.
    pub async fn list(&self) -> io::Result<Vec<SessionRecord>> {
        let mut entries = match fs::read_dir(&self.dir).await {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut records = Vec::new();
        while let Some(entry) = entries.next_entry().await? {
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "json") {
                match read_json::<SessionRecord>(&path).await {
                    Ok(Some(record)) => records.push(record),
                    Ok(None) => {}
                    Err(err) => tracing::warn!(path = %path.display(), error = %err, "skipping an unreadable session"),
                }
            }
        }
        Ok(records)
    }

    /// Forgets the session and its receipts. Idempotent.
    pub async fn remove(&self, id: &str) -> io::Result<()> {
        ignore_missing(fs::remove_dir_all(self.chunks_dir(id)).await)?;
        ignore_missing(fs::remove_file(self.record_path(id)).await)
    }

    /// Records a chunk's receipt, replacing an earlier one for the same index.
    ///
    /// Not fsynced (one per chunk would cost a sync per chunk on the upload path): after a
    /// crash a receipt may be missing or unreadable, and that chunk then counts as not received
    /// and is sent again, which chunks allow.
    pub async fn save_receipt(&self, id: &str, receipt: &ChunkReceipt) -> io::Result<()> {
        write_json(&self.chunks_dir(id).join(format!("{}.json", receipt.index)), receipt, false).await
    }

    /// Forgets the receipt of chunk `index`, before its bytes are sent again: while they
    /// arrive the chunk counts as missing, so no completion pairs the old receipt with new bytes.
    pub async fn forget_receipt(&self, id: &str, index: u32) -> io::Result<()> {
        ignore_missing(fs::remove_file(self.chunks_dir(id).join(format!("{index}.json"))).await)
    }

    /// Every receipt of the session, in index order.
    pub async fn receipts(&self, id: &str) -> io::Result<Vec<ChunkReceipt>> {
        let mut entries = match fs::read_dir(self.chunks_dir(id)).await {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut receipts = Vec::new();
        while let Some(entry) = entries.next_entry().await? {
            let path = entry.path();
            // Temporary files of an interrupted write end in `.tmp`; only finished receipts count.
            if path.extension().is_some_and(|ext| ext == "json") {
                match read_json::<ChunkReceipt>(&path).await {
                    Ok(Some(receipt)) => receipts.push(receipt),
                    Ok(None) => {}
                    // A receipt torn by a crash: the chunk counts as missing and is sent again.
                    Err(err) if err.kind() != io::ErrorKind::PermissionDenied => {
                        tracing::warn!(path = %path.display(), error = %err, "ignoring an unreadable chunk receipt");
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        receipts.sort_by_key(|receipt| receipt.index);
        Ok(receipts)
    }
}

fn ignore_missing(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

async fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(io::Error::other),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// Writes to a temporary name, fsyncs when `durable`, then renames: a reader sees the old file
/// or the new one.
async fn write_json<T: Serialize>(path: &Path, value: &T, durable: bool) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).await?;
    let temp = parent.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut file = fs::File::create(&temp).await?;
    tokio::io::AsyncWriteExt::write_all(&mut file, &bytes).await?;
    if durable {
        file.sync_all().await?;
    }
    drop(file);
    fs::rename(&temp, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SessionRecord {
        let staged = StagedUpload { key: "a/b".into(), size: 10, chunk_size: 1024, handle: "h".into() };
        SessionRecord { session_id: id.into(), staged, expires_at: 5, completed: false, outcome: None }
    }

    #[test]
    fn session_ids_cannot_name_other_files() {
        assert!(valid_session_id("0196f0c4-aaaa_bbbb"));
        for bad in ["", "../x", "a/b", "a.json", &"x".repeat(129)] {
            assert!(!valid_session_id(bad), "{bad:?} accepted");
        }
    }

    #[tokio::test]
    async fn records_and_receipts_survive_a_new_store_and_are_removed_together() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path().join("sessions"));
        store.save(&record("s1")).await.unwrap();
        for index in [2, 0] {
            let receipt = ChunkReceipt { index, size: 1, etag: None, chaining_value: "cv".into() };
            store.save_receipt("s1", &receipt).await.unwrap();
        }
        let reopened = SessionStore::new(dir.path().join("sessions"));
        assert_eq!(reopened.load("s1").await.unwrap(), Some(record("s1")));
        let indexes: Vec<u32> = reopened.receipts("s1").await.unwrap().iter().map(|r| r.index).collect();
        assert_eq!(indexes, [0, 2]);
        reopened.remove("s1").await.unwrap();
        reopened.remove("s1").await.unwrap();
        assert_eq!(reopened.load("s1").await.unwrap(), None);
        assert!(reopened.receipts("s1").await.unwrap().is_empty());
    }
}
