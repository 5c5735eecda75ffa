//! External downloads: the node fetches a URL the master names into a blob, reports progress
//! about once a second, then completion or failure, and honours cancels. Owns the running
//! fetches and their HTTP client; which addresses a fetch may reach is `guard`'s business, and
//! what the blob becomes (a file, a de-duplicated copy, nothing) is the master's.
//!
//! A fetch never buffers the body: it streams into `put_stream`, which leaves nothing behind
//! when it fails. Cancels and the time limit end the *stream* rather than dropping the store
//! call, so `put_stream` always finishes: either nothing is stored, or the blob is complete and
//! this module decides whether to keep it.

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use nubo_common::storage::{BlobStore, ByteStream, StorageError, StorageKey};
use nubo_protocol::client::RpcClient;
use nubo_protocol::methods::{
    Ack, Blake3Hex, ExternalDownloadCancelParams, ExternalDownloadCompleteParams, ExternalDownloadCreateParams,
    ExternalDownloadFailedParams, ExternalDownloadProgressParams, FailureReason, Method,
};
use nubo_protocol::rpc::RpcError;
use reqwest::Url;
use reqwest::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderMap};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::guard::Refusal;
use crate::state::Shared;

/// How often the master hears how far a fetch got.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// First wait before resending a completion or failure report the master did not answer.
const FIRST_REPORT_RETRY: Duration = Duration::from_secs(1);
/// Longest file name passed on to the master (bytes); longer suggestions are cut.
const MAX_FILE_NAME: usize = 255;

/// Removes a fetch from [`crate::state::Fetches`] when its task ends, however it ends (even by a panic).
struct Registration {
    node: Shared,
    task_id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.node.fetches.running().remove(&self.task_id);
    }
}

/// Everything one fetch needs, checked.
struct Job {
    task_id: String,
    url: Url,
    key: StorageKey,
    max_size: u64,
    deadline: Instant,
    /// Longest wait between two attempts of the final report.
    report_retry_max: Duration,
    http: reqwest::Client,
    master: RpcClient,
    cancel: CancellationToken,
}

/// `external_download_create`: checks the params and the URL, then fetches in the background
/// and acknowledges at once. A task id that is already running acknowledges again.
pub async fn create(node: &Shared, params: ExternalDownloadCreateParams) -> Result<Ack, RpcError> {
    const METHOD: Method = Method::ExternalDownloadCreate;
    if !valid_task_id(&params.task_id) {
        return Err(RpcError::invalid_params(METHOD, "task_id must be 1 to 128 of A-Z a-z 0-9 _ -"));
    }
    let key = StorageKey::parse(&params.storage_key).map_err(|error| RpcError::invalid_params(METHOD, error))?;
    let url = Url::parse(&params.url).map_err(|_| RpcError::invalid_params(METHOD, "the URL cannot be parsed"))?;
    if let Err(refusal) = node.fetches.guard.check_url(&url) {
        tracing::warn!(task = %params.task_id, host = url.host_str().unwrap_or_default(), %refusal,
            "external download refused");
        return Err(RpcError::invalid_params(METHOD, refusal));
    }
    let Some(master) = node.master.clone() else {
        return Err(RpcError::unavailable("this node has no master_url to report external downloads to"));
    };
    let http = node.fetches.http.clone().map_err(|error| {
        tracing::error!(%error, "the external download client could not be built");
        RpcError::unavailable("external downloads cannot run on this node")
    })?;
    let Some(cancel) = node.fetches.register(&params.task_id, &node.shutdown) else {
        return Ok(Ack {});
    };
    let configured = node.config.fetch_timeout_seconds;
    let time_limit = Duration::from_secs(params.timeout_secs.map_or(configured, |asked| asked.min(configured)));
    tracing::info!(task = %params.task_id, host = url.host_str().unwrap_or_default(), key = %key,
        max_size = params.max_size, ?time_limit, "external download started");
    let job = Job {
        task_id: params.task_id,
        url,
        key,
        max_size: params.max_size,
        deadline: deadline_after(time_limit),
        // At least the first wait: a zero would resend without pause.
        report_retry_max: Duration::from_secs(node.config.report_retry_max_seconds).max(FIRST_REPORT_RETRY),
        http,
        master,
        cancel,
    };
    let registration = Registration { node: node.clone(), task_id: job.task_id.clone() };
    tokio::spawn(async move {
        run(&registration.node, &job).await;
        drop(registration);
    });
    Ok(Ack {})
}

/// `external_download_cancel`: stops the fetch if it runs; its partial bytes go with it and
/// nothing is reported. An unknown or finished task acknowledges too.
pub async fn cancel(node: &Shared, params: ExternalDownloadCancelParams) -> Result<Ack, RpcError> {
    if let Some(token) = node.fetches.running().get(&params.task_id) {
        tracing::info!(task = %params.task_id, "external download cancel requested");
        token.cancel();
    }
    Ok(Ack {})
}

/// `time_limit` from now; a limit past what the clock can represent (a huge configured value)
/// means about a century rather than a panic.
fn deadline_after(time_limit: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(time_limit).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}

/// 1 to 128 of A-Z a-z 0-9 _ - (the master's task ids end up in logs and report params).
fn valid_task_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One fetch from start to report.
async fn run(node: &Shared, job: &Job) {
    let progress = Arc::new(Progress::default());
    let ticker =
        tokio::spawn(report_progress(job.master.clone(), job.task_id.clone(), progress.clone(), job.cancel.clone()));
    let fetched = fetch(node, job, &progress).await;
    ticker.abort();
    match fetched {
        Ok(fetched) => finish(node, job, fetched).await,
        Err(failure) => fail(node, job, failure).await,
    }
}

/// Bytes received so far and the announced total, shared with the progress ticker.
#[derive(Debug)]
struct Progress {
    downloaded: AtomicU64,
    /// `UNKNOWN` until the remote announces a length.
    total: AtomicU64,
}

impl Progress {
    const UNKNOWN: u64 = u64::MAX;

    fn total(&self) -> Option<u64> {
        Some(self.total.load(Ordering::Relaxed)).filter(|&total| total != Self::UNKNOWN)
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self { downloaded: AtomicU64::new(0), total: AtomicU64::new(Self::UNKNOWN) }
    }
}

/// Tells the master how far the fetch got, once a second, until aborted. Best effort: an
/// unanswered report is skipped, never retried, and never holds up the stream. The master's
/// `cancel: true` stops the fetch (a cancel call that never arrived).
async fn report_progress(master: RpcClient, task_id: String, progress: Arc<Progress>, cancel: CancellationToken) {
    let mut ticks = tokio::time::interval_at(Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let report = ExternalDownloadProgressParams {
            task_id: task_id.clone(),
            downloaded: progress.downloaded.load(Ordering::Relaxed),
            total: progress.total(),
        };
        match master.call(report).await {
            Ok(answer) if answer.cancel => {
                tracing::info!(task = %task_id, "the master no longer wants the external download");
                cancel.cancel();
                return;
            }
            Ok(_) => {}
            Err(error) => tracing::debug!(task = %task_id, %error, "progress report not delivered"),
        }
    }
}

/// What a successful fetch stored and learnt about the content.
struct Fetched {
    size: u64,
    blake3: String,
    file_name: Option<String>,
    content_type: Option<String>,
}

/// Why a fetch ended without a blob; `message` goes to the master and on to the user, so it
/// never holds the URL (which may carry credentials).
#[derive(Debug)]
struct Failure {
    reason: FailureReason,
    message: String,
    http_status: Option<u16>,
}

impl Failure {
    fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into(), http_status: None }
    }

    fn canceled() -> Self {
        Self::new(FailureReason::Canceled, "canceled")
    }

    fn timeout() -> Self {
        Self::new(FailureReason::Timeout, "the download took longer than allowed")
    }

    fn too_large(limit: u64) -> Self {
        Self::new(FailureReason::TooLarge, format!("the content is larger than {limit} bytes"))
    }

    fn from_request(error: reqwest::Error) -> Self {
        if let Some(refusal) = find_refusal(&error) {
            let reason = match refusal {
                Refusal::TooManyRedirects => FailureReason::Network,
                Refusal::Scheme | Refusal::NoHost | Refusal::Address => FailureReason::Forbidden,
            };
            return Self::new(reason, refusal.to_string());
        }
        if error.is_timeout() {
            return Self::new(FailureReason::Timeout, "the remote did not answer in time");
        }
        Self::new(FailureReason::Network, describe(&error.without_url()))
    }

    /// A failure of `put_stream`; a broken stream is the network's fault, not the store's.
    fn from_storage(error: StorageError) -> Self {
        match error {
            StorageError::TooLarge { limit } => Self::too_large(limit),
            StorageError::Body(detail) => {
                Self::new(FailureReason::Network, format!("the download broke off: {detail}"))
            }
            StorageError::AlreadyExists(_) => {
                Self::new(FailureReason::Storage, "a blob already exists at the storage key")
            }
            error => {
                tracing::error!(%error, "storing an external download failed");
                Self::new(FailureReason::Storage, "the storage node could not store the content")
            }
        }
    }
}

/// The guard's refusal somewhere in a request error's causes (from the resolver or the
/// redirect policy, wrapped by reqwest and hyper).
fn find_refusal(error: &reqwest::Error) -> Option<Refusal> {
    let mut cause: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(refusal) = current.downcast_ref::<Refusal>() {
            return Some(refusal.clone());
        }
        cause = current.source();
    }
    None
}

/// An error and its causes on one line, each said once.
fn describe(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cause = Some(error);
    while let Some(current) = cause {
        let text = current.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        cause = current.source();
    }
    parts.join(": ")
}

/// Requests the URL and streams the body into the store. Cancels and the deadline are
/// injected into the body stream (see the module docs), so whatever this returns, the store
/// holds either the complete blob (`Ok`) or nothing.
async fn fetch(node: &Shared, job: &Job, progress: &Arc<Progress>) -> Result<Fetched, Failure> {
    let request = job.http.get(job.url.clone()).send();
    let response = tokio::select! {
        () = job.cancel.cancelled() => return Err(Failure::canceled()),
        () = tokio::time::sleep_until(job.deadline) => return Err(Failure::timeout()),
        response = request => response.map_err(Failure::from_request)?,
    };
    let status = response.status();
    if !status.is_success() {
        let mut failure = Failure::new(FailureReason::HttpStatus, format!("the remote answered HTTP {status}"));
        failure.http_status = Some(status.as_u16());
        return Err(failure);
    }
    let total = response.content_length();
    if let Some(total) = total {
        if total > job.max_size {
            return Err(Failure::too_large(job.max_size));
        }
        progress.total.store(total, Ordering::Relaxed);
    }
    let file_name = suggested_file_name(response.headers(), response.url());
    let content_type = response.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let body = interruptible(response, job.cancel.clone(), job.deadline, progress.clone());
    match node.store.put_stream(&job.key, body, Some(job.max_size)).await {
        Ok(stored) => Ok(Fetched { size: stored.size, blake3: stored.blake3, file_name, content_type }),
        // The stream was ended on purpose: say why rather than "the body failed".
        Err(StorageError::Body(_)) if job.cancel.is_cancelled() => Err(Failure::canceled()),
        Err(StorageError::Body(_)) if Instant::now() >= job.deadline => Err(Failure::timeout()),
        Err(error) => Err(Failure::from_storage(error)),
    }
}

/// The remote's body as the store reads it: pieces counted into `progress`, and an error
/// (which ends the stream) as soon as the fetch is canceled or its deadline passes, even while
/// the remote is silent.
fn interruptible(
    response: reqwest::Response,
    cancel: CancellationToken,
    deadline: Instant,
    progress: Arc<Progress>,
) -> ByteStream {
    let state = Some((Box::pin(response.bytes_stream()), cancel, progress));
    Box::pin(futures_util::stream::unfold(state, move |state| async move {
        let (mut body, cancel, progress) = state?;
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(io::Error::other("the download was canceled")),
            () = tokio::time::sleep_until(deadline) => Err(io::Error::other("the download took longer than allowed")),
            piece = body.next() => match piece {
                None => return None,
                Some(Ok(piece)) => Ok(piece),
                Some(Err(error)) => Err(io::Error::other(describe(&error.without_url()))),
            },
        };
        match next {
            Ok(piece) => {
                progress.downloaded.fetch_add(piece.len() as u64, Ordering::Relaxed);
                Some((Ok(piece), Some((body, cancel, progress))))
            }
            // Nothing after an error: the store stops reading there anyway.
            Err(error) => Some((Err(error), None)),
        }
    }))
}

/// Reports a stored blob to the master and keeps or drops it as the answer says.
async fn finish(node: &Shared, job: &Job, fetched: Fetched) {
    if job.cancel.is_cancelled() {
        // Canceled while the last bytes were landing: nobody wants this blob.
        delete_blob(node, job).await;
        tracing::info!(task = %job.task_id, "external download canceled");
        return;
    }
    let Ok(blake3) = Blake3Hex::parse(&fetched.blake3) else {
        delete_blob(node, job).await;
        tracing::error!(task = %job.task_id, hash = %fetched.blake3, "the store answered a malformed hash");
        fail(node, job, Failure::new(FailureReason::Storage, "the storage node could not hash the content")).await;
        return;
    };
    let report = ExternalDownloadCompleteParams {
        task_id: job.task_id.clone(),
        storage_key: job.key.to_string(),
        size: fetched.size,
        blake3,
        file_name: fetched.file_name,
        content_type: fetched.content_type,
    };
    // From here on the master's answer decides the blob's fate, not a cancel: an earlier attempt
    // may have reached it, and it answers a canceled task with `keep_blob: false`.
    match job.master.call_until_answered(report, FIRST_REPORT_RETRY, job.report_retry_max).await {
        Ok(answer) if answer.keep_blob => {
            tracing::info!(task = %job.task_id, key = %job.key, size = fetched.size, "external download complete");
        }
        Ok(_) => {
            tracing::info!(task = %job.task_id, "the master already has this content; dropping the fetched copy");
            delete_blob(node, job).await;
        }
        Err(error) => {
            tracing::warn!(task = %job.task_id, %error, "the master refused the finished external download; deleting it");
            delete_blob(node, job).await;
        }
    }
}

/// Reports a failure to the master (nothing is stored by then); a cancel reports nothing.
async fn fail(node: &Shared, job: &Job, failure: Failure) {
    if failure.reason == FailureReason::Canceled {
        if node.shutdown.is_cancelled() {
            // Fetches are not persisted, so none resumes after a restart; the master learns
            // nothing here and has to give up on the task by its own deadline.
            tracing::warn!(task = %job.task_id, "external download interrupted by the node stopping");
        } else {
            tracing::info!(task = %job.task_id, "external download canceled");
        }
        return;
    }
    tracing::warn!(task = %job.task_id, reason = ?failure.reason, message = %failure.message,
        "external download failed");
    let report = ExternalDownloadFailedParams {
        task_id: job.task_id.clone(),
        reason: failure.reason,
        message: failure.message,
        http_status: failure.http_status,
    };
    let answered = tokio::select! {
        // A master that canceled the task does not need to hear why it failed.
        () = job.cancel.cancelled() => return,
        answered = job.master.call_until_answered(report, FIRST_REPORT_RETRY, job.report_retry_max) => answered,
    };
    if let Err(error) = answered {
        tracing::warn!(task = %job.task_id, %error, "the master refused the failure report");
    }
}

async fn delete_blob(node: &Shared, job: &Job) {
    if let Err(error) = node.store.delete(&job.key).await {
        tracing::error!(task = %job.task_id, key = %job.key, %error, "could not delete a fetched blob");
    }
}

/// A name the remote suggested: `Content-Disposition`'s `filename*` or `filename`, else the last
/// non-empty segment of the (final) URL's path, percent-decoded.
fn suggested_file_name(headers: &HeaderMap, url: &Url) -> Option<String> {
    let from_header = headers.get(CONTENT_DISPOSITION).and_then(|value| disposition_file_name(value.as_bytes()));
    from_header.or_else(|| {
        let segment = url.path_segments()?.rfind(|segment| !segment.is_empty())?;
        clean_file_name(&String::from_utf8(percent_decode(segment)).ok()?)
    })
}

/// The file name of a `Content-Disposition` value (RFC 6266): `filename*` (RFC 8187,
/// `UTF-8''…` or `ISO-8859-1''…`) wins over `filename` (a token or a quoted string).
fn disposition_file_name(raw: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut plain = None;
    let mut extended = None;
    for (name, value) in disposition_params(text) {
        match name.to_ascii_lowercase().as_str() {
            "filename" => plain = Some(value),
            "filename*" => extended = decode_extended(&value).or(extended),
            _ => {}
        }
    }
    extended.and_then(|name| clean_file_name(&name)).or_else(|| clean_file_name(&plain?))
}

/// The `name=value` parameters after the disposition type, quoted strings unescaped.
fn disposition_params(text: &str) -> Vec<(String, String)> {
    let mut params = Vec::new();
    // Skip the disposition type (`attachment`, `inline`).
    let Some((_, mut rest)) = text.split_once(';') else { return params };
    loop {
        rest = rest.trim_start_matches(|c: char| c == ';' || c.is_whitespace());
        if rest.is_empty() {
            return params;
        }
        let name_end = rest.find(['=', ';']).unwrap_or(rest.len());
        let name = rest[..name_end].trim().to_owned();
        rest = &rest[name_end..];
        let Some(after_equals) = rest.strip_prefix('=') else { continue };
        let after_equals = after_equals.trim_start();
        let value;
        if let Some(quoted) = after_equals.strip_prefix('"') {
            let mut unescaped = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((index, c)) = chars.next() {
                match c {
                    '\\' => unescaped.extend(chars.next().map(|(_, escaped)| escaped)),
                    '"' => {
                        end = index + 1;
                        break;
                    }
                    c => unescaped.push(c),
                }
            }
            value = unescaped;
            rest = &quoted[end..];
        } else {
            let value_end = after_equals.find(';').unwrap_or(after_equals.len());
            value = after_equals[..value_end].trim().to_owned();
            rest = &after_equals[value_end..];
        }
        params.push((name, value));
    }
}

/// An RFC 8187 `charset'language'percent-encoded` value, for the charsets RFC 8187 requires.
fn decode_extended(value: &str) -> Option<String> {
    let mut parts = value.splitn(3, '\'');
    let charset = parts.next()?.to_ascii_lowercase();
    let _language = parts.next()?;
    let bytes = percent_decode(parts.next()?);
    match charset.as_str() {
        "utf-8" => String::from_utf8(bytes).ok(),
        "iso-8859-1" => Some(bytes.into_iter().map(char::from).collect()),
        _ => None,
    }
}

/// `%XX` sequences as bytes; a `%` not followed by two hex digits stays as it is.
fn percent_decode(text: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(text).collect()
}

/// The last path component of a suggested name without control characters, at most
/// [`MAX_FILE_NAME`] bytes; `None` when nothing usable remains. The master applies its own
/// naming rules on top; this only keeps a remote from handing it paths.
fn clean_file_name(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned: String = last.chars().filter(|c| !c.is_control()).collect();
    let trimmed = cleaned.trim();
    if trimmed.is_empty() || trimmed == "." || trimmed == ".." {
        return None;
    }
    let mut end = trimmed.len().min(MAX_FILE_NAME);
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    Some(trimmed[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn name_from(disposition: &str, url: &str) -> Option<String> {
        let mut headers = HeaderMap::new();
        if !disposition.is_empty() {
            headers.insert(CONTENT_DISPOSITION, HeaderValue::from_str(disposition).unwrap());
        }
        suggested_file_name(&headers, &Url::parse(url).unwrap())
    }

    #[test]
    fn task_ids_are_short_plain_tokens() {
        assert!(valid_task_id("task_01-ABC"));
        assert!(valid_task_id(&"a".repeat(128)));
        for bad in ["", "a b", "a/b", "ä", &"a".repeat(129)] {
            assert!(!valid_task_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn content_disposition_names_win_over_the_url() {
        let url = "https://example.com/dl/ignored.bin";
        assert_eq!(name_from("attachment; filename=report.pdf", url).as_deref(), Some("report.pdf"));
        assert_eq!(
            name_from(r#"attachment; filename="a \"quoted\" name.txt""#, url).as_deref(),
            Some(r#"a "quoted" name.txt"#)
        );
        assert_eq!(
            name_from("attachment; filename=\"fallback.txt\"; filename*=UTF-8''%E2%82%AC%20rates.txt", url).as_deref(),
            Some("€ rates.txt")
        );
        assert_eq!(
            name_from("attachment; filename*=iso-8859-1'en'%A3%20rates.txt", url).as_deref(),
            Some("£ rates.txt")
        );
        assert_eq!(name_from("inline; FILENAME = spaced.txt ; size=3", url).as_deref(), Some("spaced.txt"));
    }

    #[test]
    fn suggested_names_lose_their_directories_and_control_characters() {
        let url = "https://example.com/";
        assert_eq!(name_from(r#"attachment; filename="../../etc/passwd""#, url).as_deref(), Some("passwd"));
        assert_eq!(name_from(r#"attachment; filename="C:\\temp\\x.exe""#, url).as_deref(), Some("x.exe"));
        assert_eq!(name_from("attachment; filename*=UTF-8''a%0Ab.txt", url).as_deref(), Some("ab.txt"));
        assert_eq!(name_from(r#"attachment; filename="..""#, url), None);
        assert_eq!(name_from("attachment", url), None);
        let long = name_from(&format!("attachment; filename={}", "é".repeat(200)), url).unwrap();
        assert!(long.len() <= MAX_FILE_NAME && long.chars().all(|c| c == 'é'));
    }

    #[test]
    fn without_a_disposition_the_last_path_segment_is_the_name() {
        assert_eq!(name_from("", "https://example.com/a/b/My%20File.tar.gz?x=1").as_deref(), Some("My File.tar.gz"));
        assert_eq!(name_from("", "https://example.com/dir/").as_deref(), Some("dir"));
        assert_eq!(name_from("", "https://example.com/a/%2e%2e").as_deref(), None);
        assert_eq!(name_from("", "https://example.com/"), None);
        assert_eq!(name_from("", "https://example.com/100%"), Some("100%".to_owned()));
    }
}
