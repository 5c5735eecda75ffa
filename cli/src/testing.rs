//! Interruptions on demand, so tests can check that transfers resume: with
//! `NUBO_CLI_STOP_AFTER_CHUNKS=N` the process stops right after its N-th chunk (or small file)
//! was stored, with `NUBO_CLI_STOP_AFTER_BYTES=N` once N downloaded bytes are on disk, as a
//! killed process would (exit code 6, like a broken connection). With `NUBO_CLI_STOP_MODE=pause`
//! the thread that reached the limit sleeps for good instead, so a test can `kill -9` the process
//! at that very point. With `NUBO_CLI_LOSE_ANSWER_OF_UPLOAD=N` the answer to the N-th small-file
//! upload request is thrown away once the server stored the file, as a broken connection would
//! lose it. Unset, they cost one atomic add.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

static CHUNKS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

fn limit(name: &'static str, cell: &'static OnceLock<Option<u64>>) -> Option<u64> {
    *cell.get_or_init(|| std::env::var(name).ok().and_then(|v| v.parse().ok()))
}

fn stop(what: &str) -> ! {
    if std::env::var("NUBO_CLI_STOP_MODE").is_ok_and(|mode| mode == "pause") {
        eprintln!("paused on purpose after {what} (test hook)");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    eprintln!("stopped on purpose after {what} (test hook)");
    std::process::exit(crate::error::ExitKind::Network as i32);
}

/// Counts one stored chunk.
pub fn chunk_sent() {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    let sent = CHUNKS.fetch_add(1, Ordering::SeqCst) + 1;
    if limit("NUBO_CLI_STOP_AFTER_CHUNKS", &LIMIT).is_some_and(|n| sent >= n) {
        stop(&format!("{sent} chunk(s)"));
    }
}

/// Counts `n` downloaded bytes handed to the file; `true` when the process must stop once they
/// are flushed to disk (then call [`stop_after_bytes`]).
pub fn bytes_written(n: u64) -> bool {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    let written = BYTES.fetch_add(n, Ordering::SeqCst) + n;
    limit("NUBO_CLI_STOP_AFTER_BYTES", &LIMIT).is_some_and(|limit| written >= limit)
}

pub fn stop_after_bytes() -> ! {
    stop(&format!("{} byte(s)", BYTES.load(Ordering::SeqCst)))
}

/// `NUBO_CLI_PAUSE_BEFORE_TRASH=FILE`: `nubo sync` waits, before its remote deletions, until
/// `FILE` exists (saying so on standard error), so a test can let another device act between
/// a run's plan and its deletions.
pub async fn pause_before_trash() {
    let Some(flag) = std::env::var_os("NUBO_CLI_PAUSE_BEFORE_TRASH") else { return };
    eprintln!("waiting before the remote deletions (test hook)");
    while !std::path::Path::new(&flag).exists() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `NUBO_CLI_PAUSE_IN_UPLOAD=FLAG`: each upload of `nubo sync` waits, before it reads the file,
/// until `FLAG.read` exists, and again, once the server holds the bytes, until `FLAG.sent`
/// exists (saying so on standard error each time), so a test can write to a file while it is
/// being uploaded at exactly those two points.
pub async fn pause_in_upload(point: &str) {
    let Some(flag) = std::env::var_os("NUBO_CLI_PAUSE_IN_UPLOAD") else { return };
    let mut flag = std::path::PathBuf::from(flag).into_os_string();
    flag.push(format!(".{point}"));
    eprintln!("waiting in the upload until {point} (test hook)");
    while !std::path::Path::new(&flag).exists() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Counts one request of a remote move (a move to another folder, or a rename): with
/// `NUBO_CLI_STOP_AFTER_MOVE_STEPS=N` the process stops right after the N-th, as one killed
/// between the two requests of a move into another folder under another name would.
pub fn move_step_done() {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    static STEPS: AtomicU64 = AtomicU64::new(0);
    let done = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    if limit("NUBO_CLI_STOP_AFTER_MOVE_STEPS", &LIMIT).is_some_and(|n| done >= n) {
        stop(&format!("{done} move step(s)"));
    }
}

/// Counts one answer to a small-file upload request (the file is stored): `true` when it is the
/// one `NUBO_CLI_LOSE_ANSWER_OF_UPLOAD=N` names, which the caller then drops as if the
/// connection broke before it arrived.
pub fn lose_upload_answer() -> bool {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    static ANSWERS: AtomicU64 = AtomicU64::new(0);
    let answered = ANSWERS.fetch_add(1, Ordering::SeqCst) + 1;
    let lost = limit("NUBO_CLI_LOSE_ANSWER_OF_UPLOAD", &LIMIT) == Some(answered);
    if lost {
        eprintln!("lost the answer to upload request {answered} on purpose (test hook)");
    }
    lost
}
