//! What can go wrong in a command, the exit code each kind of failure gives scripts, and the
//! message that tells the user what to do next.

use std::fmt;

use serde_json::{Value, json};

/// The exit codes, documented in docs/src/cli.md; scripts rely on them, so they never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Any other failure: an error answer of the server not listed below, a local I/O error.
    Failed = 1,
    /// The command line is wrong (clap uses 2 for its own usage errors too).
    Usage = 2,
    /// Not signed in, or the session ended: `nubo login` again.
    AuthNeeded = 3,
    /// A remote or local path does not exist.
    NotFound = 4,
    /// The name is taken, or the object changed meanwhile.
    Conflict = 5,
    /// The server could not be reached, or the connection broke.
    Network = 6,
    /// Refused: not allowed, larger than the policy allows, or over quota (also a `nubo sync`
    /// run whose only paths left out of step were refused as over quota).
    Refused = 7,
    /// `nubo sync` finished but not everything is in step: conflicts were kept (both versions
    /// are on both sides), or paths were skipped (names one side cannot hold, changes meanwhile).
    NotConverged = 8,
    /// `nubo sync` refused a run that looks like an accident rather than a wish: the local folder
    /// is empty or on another file system than last time (an unmounted disk?), or the run would
    /// delete more than half of what was synced at once. Nothing was changed.
    Unsafe = 9,
}

/// A failed command: its kind, what happened, the server's error code when it answered one,
/// and a hint at what to do next.
#[derive(Debug)]
pub struct CliError {
    pub kind: ExitKind,
    pub message: String,
    pub code: Option<String>,
    pub status: Option<u16>,
    pub hint: Option<String>,
    /// The server's id of the failed request (its logs name it).
    pub request_id: Option<String>,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(kind: ExitKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), code: None, status: None, hint: None, request_id: None }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ExitKind::Usage, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ExitKind::NotFound, message)
            .with_hint("check the path with `nubo ls` (remote paths start at your root, `/`)")
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ExitKind::Conflict, message)
    }

    pub fn auth_needed(message: impl Into<String>) -> Self {
        Self::new(ExitKind::AuthNeeded, message).with_hint("sign in with `nubo login <server>`")
    }

    /// A local file operation that failed on `path`.
    pub fn local(what: &str, path: &std::path::Path, err: std::io::Error) -> Self {
        let kind = if err.kind() == std::io::ErrorKind::NotFound { ExitKind::NotFound } else { ExitKind::Failed };
        Self::new(kind, format!("{what} {}: {err}", path.display()))
    }

    /// The request did not get an answer (or the answer broke off).
    pub fn network(server: &str, err: &reqwest::Error) -> Self {
        let mut message = format!("no answer from {server}: {err}");
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        Self::new(ExitKind::Network, message)
            .with_hint("check the server address and your connection; running the same command again resumes transfers")
    }

    /// An error answer of the server: `status` and its uniform body (`{code, message, field?}`).
    pub fn from_answer(status: u16, body: &str) -> Self {
        let parsed: Option<Value> = serde_json::from_str(body).ok();
        let code = parsed.as_ref().and_then(|b| b["code"].as_str()).map(str::to_owned);
        let mut message = parsed
            .as_ref()
            .and_then(|b| b["message"].as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("the server answered HTTP {status}"));
        if let Some(field) = parsed.as_ref().and_then(|b| b["field"].as_str()) {
            message.push_str(&format!(" (field `{field}`)"));
        }
        let kind = match status {
            401 => ExitKind::AuthNeeded,
            404 | 410 => ExitKind::NotFound,
            409 | 412 => ExitKind::Conflict,
            403 | 413 | 507 => ExitKind::Refused,
            _ => ExitKind::Failed,
        };
        let hint = match (status, code.as_deref()) {
            (401, _) => Some("sign in again with `nubo login <server>`"),
            (404, _) => Some("check the path with `nubo ls`"),
            (409, Some("object.name_taken")) => Some(
                "the name is taken: choose another name, remove the old one (`nubo rm`), or pass --overwrite to `put`",
            ),
            (409, _) => Some("the object changed meanwhile or is in the way: look with `nubo ls` and try again"),
            (413, _) => Some("the file is larger than your storage policy allows"),
            (507, _) => Some("over quota: free space (`nubo rm --purge`) or ask an administrator for more"),
            (403, _) => Some("your account may not do this; ask an administrator"),
            (429, _) => Some("too many attempts: wait a little and try again"),
            (500..=599, _) => Some("the server failed; try again later, or give its administrator the request id"),
            _ => None,
        };
        let mut error = Self::new(kind, message);
        error.code = code;
        error.status = Some(status);
        error.hint = hint.map(str::to_owned);
        error.request_id = parsed.as_ref().and_then(|b| b["request_id"].as_str()).map(str::to_owned);
        error
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Whether sending the same request again may succeed (a transient failure). A chunk another
    /// request is sending (409 `upload.chunk_busy`) is free once that one ends, or within seconds
    /// when its master died.
    pub fn is_transient(&self) -> bool {
        self.kind == ExitKind::Network
            || matches!(self.status, Some(408 | 429 | 500 | 502 | 503 | 504))
            || self.code.as_deref() == Some("upload.chunk_busy")
    }

    /// Whether the server refused for lack of space (507 `storage.quota_exceeded`).
    pub fn is_over_quota(&self) -> bool {
        self.status == Some(507) || self.code.as_deref() == Some("storage.quota_exceeded")
    }

    pub fn exit_code(&self) -> i32 {
        self.kind as i32
    }

    /// The error as scripts read it with `--json`.
    pub fn to_json(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "code": self.code,
            "status": self.status,
            "exit_code": self.exit_code(),
            "hint": self.hint,
            "request_id": self.request_id,
        }})
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        let facts: Vec<String> = [
            self.code.clone(),
            self.status.map(|status| format!("HTTP {status}")),
            self.request_id.as_ref().map(|id| format!("request {id}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !facts.is_empty() {
            write!(f, " ({})", facts.join(", "))?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_answers_map_to_the_documented_exit_codes() {
        let body = r#"{"code":"object.name_taken","message":"taken","field":"name","request_id":"r-1"}"#;
        let taken = CliError::from_answer(409, body);
        assert_eq!((taken.exit_code(), taken.code.as_deref()), (5, Some("object.name_taken")));
        assert_eq!(taken.request_id.as_deref(), Some("r-1"));
        let shown = taken.to_string();
        assert!(shown.contains("object.name_taken, HTTP 409, request r-1") && shown.contains("\nhint: "), "{shown}");
        let codes: Vec<i32> = [401, 404, 410, 409, 403, 413, 507, 500, 422]
            .iter()
            .map(|&s| CliError::from_answer(s, "").exit_code())
            .collect();
        assert_eq!(codes, [3, 4, 4, 5, 7, 7, 7, 1, 1]);
        assert!(CliError::from_answer(503, "not json").is_transient());
        assert!(!CliError::from_answer(409, "").is_transient());
        let busy = r#"{"code":"upload.chunk_busy","message":"chunk 1 is being sent","request_id":"r-2"}"#;
        assert!(CliError::from_answer(409, busy).is_transient());
    }
}
