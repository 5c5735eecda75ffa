//! SQL of `imported_files`: the ledger of admin imports, one row per object of a policy's
//! storage recorded as a file, so a later run skips what it already did; and of
//! `import_sources`, the folders of a policy's storage imports read (import areas).

use super::ingest::{Step, StepArg};
use super::{Arg, Db, DbError};
use crate::domain::ids::{ObjectId, PolicyId};
use crate::domain::time::Millis;

/// What an import recorded of one object of a policy's storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedRow {
    pub storage_key: String,
    pub size: i64,
    pub modified: Millis,
    pub etag: Option<String>,
    pub blake3: String,
    pub object_id: ObjectId,
}

/// The ledger row of `key` in `policy_id`'s storage, if it was imported.
pub async fn find(db: &Db, policy_id: PolicyId, key: &str) -> Result<Option<ImportedRow>, DbError> {
    let policy_id = policy_id.to_string();
    let sql = "SELECT storage_key, size, modified, etag, blake3, object_id FROM imported_files
               WHERE policy_id = $1 AND storage_key = $2";
    db.read_row(sql, &[Arg::Text(&policy_id), Arg::Text(key)], |row| {
        Ok(ImportedRow {
            storage_key: row.text("storage_key")?,
            size: row.int("size")?,
            modified: row.int("modified")?,
            etag: row.opt_text("etag")?,
            blake3: row.text("blake3")?,
            object_id: row.parsed("object_id")?,
        })
    })
    .await
}

/// `$1`..`$8`: policy, key, size, modified, etag, blake3, object, now.
const RECORD: &str = "INSERT INTO imported_files
     (policy_id, storage_key, size, modified, etag, blake3, object_id, imported_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (policy_id, storage_key) DO UPDATE SET size = excluded.size, modified = excluded.modified,
     etag = excluded.etag, blake3 = excluded.blake3, object_id = excluded.object_id,
     imported_at = excluded.imported_at";

/// The ledger row of `row` in `policy_id`'s storage, as a step of the commit that records its
/// file: the ledger and the tree never disagree.
pub fn record_step(policy_id: PolicyId, row: ImportedRow, now: Millis) -> Step {
    Step {
        sql: RECORD,
        args: vec![
            StepArg::Text(policy_id.to_string()),
            StepArg::Text(row.storage_key),
            StepArg::Int(row.size),
            StepArg::Int(row.modified),
            StepArg::OptText(row.etag),
            StepArg::Text(row.blake3),
            StepArg::Text(row.object_id.to_string()),
            StepArg::Int(now),
        ],
        required: true,
    }
}

/// `$1` a key no object has, `$2` the policy, `$3` the key.
const DETACH: &str = "UPDATE physical_files SET storage_key = $1 WHERE policy_id = $2 AND storage_key = $3";

/// Moves the blob row at `key` of `policy_id` (if any) to `tombstone`, a key no object has, as
/// the first step of the commit that records the new content found at `key`: the bytes the row
/// described were changed behind Nubo's back, so it no longer names them, and releasing it
/// later must not delete them.
pub fn detach_step(policy_id: PolicyId, key: &str, tombstone: String) -> Step {
    Step {
        sql: DETACH,
        args: vec![StepArg::Text(tombstone), StepArg::Text(policy_id.to_string()), StepArg::Text(key.to_owned())],
        required: false,
    }
}

/// Remembers `prefix` ('' for all) as an import area of `policy_id`'s storage.
pub async fn remember_source(db: &Db, policy_id: PolicyId, prefix: &str, now: Millis) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO import_sources (policy_id, prefix, created_at) VALUES ($1, $2, $3)
         ON CONFLICT (policy_id, prefix) DO NOTHING",
    )
    .bind(policy_id)
    .bind(prefix)
    .bind(now)
    .execute(db.writer())
    .await?;
    Ok(())
}

/// The import areas of `policy_id`'s storage (see [`remember_source`]).
pub async fn sources_of(db: &Db, policy_id: PolicyId) -> Result<Vec<String>, DbError> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT prefix FROM import_sources WHERE policy_id = $1")
        .bind(policy_id)
        .fetch_all(db.reader())
        .await?;
    Ok(rows.into_iter().map(|(prefix,)| prefix).collect())
}
