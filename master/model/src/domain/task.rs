//! Background tasks as values: their status and type enumerations, properties and progress.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Waiting for a worker (also between retries).
    Queued,
    /// A worker holds its lease.
    Running,
    /// Finished successfully.
    Completed,
    /// Failed for good; `error` says why.
    Error,
    /// Stopped on request; whatever it changed stays consistent.
    Canceled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Error => "error",
            TaskStatus::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }

    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Error | TaskStatus::Canceled)
    }
}

/// What a task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskType {
    /// Move the files of an object (recursively) to another storage policy.
    PolicyMigrate,
    /// Fetch a URL into a folder (storage-node feature; not run by this master yet).
    ExternalDownload,
    /// Make the thumbnail of an image's content (queued by the first request for it; no owner).
    Thumbnail,
    /// Record files already in a policy's storage as a user's files, without copying bytes
    /// (`POST /admin/import`; owned by the administrator who started it).
    Import,
}

impl TaskType {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskType::PolicyMigrate => "POLICY_MIGRATE",
            TaskType::ExternalDownload => "EXTERNAL_DOWNLOAD",
            TaskType::Thumbnail => "THUMBNAIL",
            TaskType::Import => "IMPORT",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }
}

/// `TaskProps`: what a task was asked to do; each field says which task types set it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskProps {
    /// The file or folder being migrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    /// The policy files move to (`POLICY_MIGRATE`) or the fetched file lands in
    /// (`EXTERNAL_DOWNLOAD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_policy_id: Option<Uuid>,
    /// `EXTERNAL_DOWNLOAD`: the URL to fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `EXTERNAL_DOWNLOAD`: the folder the file appears in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<Uuid>,
    /// `EXTERNAL_DOWNLOAD`: the storage node that fetches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<Uuid>,
    /// `THUMBNAIL`: the blob whose content is drawn (any blob of that content will do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob_id: Option<String>,
    /// `THUMBNAIL`: the content's blake3 (the thumbnail's key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// `THUMBNAIL`: the longest side in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<u32>,
    /// `IMPORT`: the policy whose storage is imported from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_policy_id: Option<Uuid>,
    /// `IMPORT`: the folder of the policy's storage (local: below its root; S3: below its
    /// prefix) whose files are imported; empty for all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_or_prefix: Option<String>,
    /// `IMPORT`: the user the files are recorded for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<Uuid>,
    /// `IMPORT`: the folder of the user's tree the files appear in, as asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_path: Option<String>,
}

/// How far a task got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskProgress {
    pub files_total: u64,
    pub files_done: u64,
    pub bytes_total: u64,
    pub bytes_done: u64,
    /// The file the task created (`EXTERNAL_DOWNLOAD`, once completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<Uuid>,
    /// `IMPORT`: what this run of the import did so far (the result once completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportProgress>,
}

/// How far a run of an `IMPORT` got. Counts are of this run: a run that resumes after a
/// restart counts what the earlier one imported as skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportProgress {
    /// Files the listing found.
    pub files_seen: u64,
    /// Files recorded as new files.
    pub files_imported: u64,
    /// Files imported before whose source changed since: re-hashed, their file's content updated.
    pub files_updated: u64,
    /// Files imported before and unchanged (not read again), or that are already the content
    /// of a file (Nubo's own blobs).
    pub files_skipped: u64,
    /// Files not imported because something else has their name at the destination (a
    /// different file, or a file where a folder is needed), or whose name cannot be a file
    /// name; see `conflicts`.
    pub files_conflicting: u64,
    /// Bytes read to hash them.
    pub bytes_hashed: u64,
    /// Files whose content is already held by another file of the policy: recorded as
    /// referring to that content, their own bytes left alone.
    pub files_deduplicated: u64,
    /// The keys of the first conflicting files (at most 20).
    pub conflicts: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enumerations_round_trip_through_text() {
        for status in
            [TaskStatus::Queued, TaskStatus::Running, TaskStatus::Completed, TaskStatus::Error, TaskStatus::Canceled]
        {
            assert_eq!(TaskStatus::parse(status.as_str()), Some(status));
        }
        for kind in [TaskType::PolicyMigrate, TaskType::ExternalDownload, TaskType::Thumbnail, TaskType::Import] {
            assert_eq!(TaskType::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(TaskType::PolicyMigrate.as_str(), "POLICY_MIGRATE");
        assert!(TaskStatus::parse("sleeping").is_none());
    }
}
