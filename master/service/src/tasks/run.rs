//! The vocabulary of running a task: why one stopped, and the checkpoint it reports progress to
//! between units of work (the worker in `jobs::worker` provides it).

use nubo_model::db::DbError;
use nubo_model::domain::task::TaskProgress;

use crate::error::ServiceError;

/// Why a task stopped before finishing.
#[derive(Debug, thiserror::Error)]
pub enum TaskFailure {
    /// Retrying later may help (storage unavailable, database hiccup).
    #[error("{0}")]
    Transient(String),
    /// Retrying will not help.
    #[error("{0}")]
    Permanent(String),
    /// The worker must stop (cancel requested, lease lost, shutting down).
    #[error("stopped")]
    Stopped,
}

impl From<ServiceError> for TaskFailure {
    fn from(err: ServiceError) -> Self {
        use crate::error::ErrorKind;
        match err.kind {
            ErrorKind::Unavailable | ErrorKind::Internal | ErrorKind::BadGateway => {
                TaskFailure::Transient(err.to_string())
            }
            _ => TaskFailure::Permanent(err.message.into_owned()),
        }
    }
}

impl From<DbError> for TaskFailure {
    fn from(err: DbError) -> Self {
        TaskFailure::Transient(err.to_string())
    }
}

impl From<nubo_common::storage::StorageError> for TaskFailure {
    fn from(err: nubo_common::storage::StorageError) -> Self {
        if err.is_transient() {
            TaskFailure::Transient(err.to_string())
        } else {
            TaskFailure::Permanent(err.to_string())
        }
    }
}

/// What a running task tells its worker between units of work.
#[async_trait::async_trait]
pub trait Checkpoint: Send {
    /// Records progress; answers `Err(Stopped)` when the task must stop here.
    async fn checkpoint(&mut self, progress: &TaskProgress) -> Result<(), TaskFailure>;
}
