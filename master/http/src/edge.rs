//! Request-level limits at the edge of the HTTP front end: a body that stops arriving answers
//! 408, as does the body of a JSON route that takes too long in all; a JSON route refuses a
//! declared `Content-Length` over its limit before reading a byte; long requests (streams and
//! transfers) leave connections free for short ones; clients behind a trusted proxy are capped
//! per forwarded address; and request paths are logged without the download and archive tokens
//! or share codes they may carry. Connection-level limits (headers, idleness, the connection
//! caps) live in `nubo_common::serve`.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use nubo_common::serve::{DeadlineBody, GuardedBody, PerAddress, ProgressBody};
use nubo_model::config::TrustedProxies;
use tokio::sync::Semaphore;

use crate::error::error_response;
use crate::extract::client_address;
use nubo_service::error_codes as codes;

/// The JSON body limit in force, put on every request so routes that parse JSON can refuse a
/// declared length early (see [`refuse_declared_oversize`]).
#[derive(Debug, Clone, Copy)]
pub struct JsonBodyLimit(pub usize);

/// Middleware: wraps the request body so that `timeout` without a byte fails the read, and
/// answers such a request 408 `request.timeout` whatever error the handler made of it.
pub async fn body_progress(State(timeout): State<Option<Duration>>, request: Request, next: Next) -> Response {
    let Some(timeout) = timeout else { return next.run(request).await };
    let version = request.version();
    let (parts, body) = request.into_parts();
    let (body, stalled) = ProgressBody::new(body, timeout);
    let response = next.run(Request::from_parts(parts, Body::new(body))).await;
    let status = response.status();
    if !stalled.is_set() || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    tracing::info!(timeout_seconds = timeout.as_secs(), "request body stalled");
    timed_out(version, &format!("the request body stopped arriving for {} seconds", timeout.as_secs()))
}

/// The 408 `request.timeout` answer, closing the connection (the rest of the body is on it).
fn timed_out(version: Version, message: &str) -> Response {
    let mut answer = error_response(StatusCode::REQUEST_TIMEOUT, codes::REQUEST_TIMEOUT, message);
    close_after(&mut answer, version);
    answer
}

/// The total time the body of a JSON route may take (`json_body_deadline_seconds`), put on
/// every request for [`json_body_deadline`]; `None`: no limit.
#[derive(Debug, Clone, Copy)]
pub struct JsonBodyDeadline(pub Option<Duration>);

/// Middleware for routes whose body is JSON: the whole body must have arrived within the
/// deadline, counted from the request's start, else the request answers 408 `request.timeout`.
/// A small body has no reason to trickle; without this a client sending a byte just before
/// every `body_timeout_seconds` holds a connection as long as it likes.
pub async fn json_body_deadline(request: Request, next: Next) -> Response {
    let Some(JsonBodyDeadline(Some(limit))) = request.extensions().get::<JsonBodyDeadline>().copied() else {
        return next.run(request).await;
    };
    let version = request.version();
    let (parts, body) = request.into_parts();
    let (body, late) = DeadlineBody::new(body, limit);
    let response = next.run(Request::from_parts(parts, Body::new(body))).await;
    let status = response.status();
    if !late.is_set() || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    tracing::info!(deadline_seconds = limit.as_secs(), "JSON request body too slow");
    timed_out(version, &format!("the request body took over {} seconds to arrive", limit.as_secs()))
}

/// The places for long requests (`Config::long_request_slots`), put on every request for
/// [`hold_long_request_slot`].
#[derive(Debug, Clone)]
pub struct LongRequestSlots(pub Arc<Semaphore>);

/// Seconds a client refused a place for a long request is asked to wait.
const BUSY_RETRY_AFTER: u64 = 5;

/// Middleware for routes that hold their connection long (the event stream, transfers of file
/// bytes, WebDAV): each holds one of the places for long requests until its answer is sent; with
/// none free it answers 503 `request.server_busy` at once and closes the connection, so the
/// `reserved_connections` stay for short requests (sign-in, listings, `/site/ping`).
pub async fn hold_long_request_slot(request: Request, next: Next) -> Response {
    let Some(LongRequestSlots(slots)) = request.extensions().get::<LongRequestSlots>().cloned() else {
        return next.run(request).await;
    };
    let Ok(slot) = slots.try_acquire_owned() else {
        tracing::info!("no place for a long request");
        let mut answer = error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            codes::REQUEST_SERVER_BUSY,
            "the server is busy with long transfers: try again shortly",
        );
        answer.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_AFTER));
        close_after(&mut answer, request.version());
        return answer;
    };
    next.run(request).await.map(|body| GuardedBody::wrap(body, slot))
}

/// The requests in flight per client address behind the trusted proxies.
#[derive(Debug, Clone)]
pub struct ForwardedClients {
    pub proxies: Arc<TrustedProxies>,
    pub in_flight: Arc<PerAddress>,
}

/// Middleware: a request that came through a trusted proxy counts against its forwarded
/// address's `max_connections_per_address` until its answer is sent; over it, 429
/// `request.too_many_connections`. (The TCP peer is the proxy, whose connections the edge does
/// not cap per address.)
pub async fn cap_forwarded_clients(State(clients): State<ForwardedClients>, request: Request, next: Next) -> Response {
    let Some(peer) = request.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|info| info.0.ip()) else {
        return next.run(request).await;
    };
    if !clients.proxies.contains(peer) {
        return next.run(request).await;
    }
    let client = client_address(peer, request.headers(), &clients.proxies);
    let Some(hold) = clients.in_flight.admit(client) else {
        tracing::info!(%client, "too many requests in flight from one forwarded address");
        let mut answer = error_response(
            StatusCode::TOO_MANY_REQUESTS,
            codes::REQUEST_TOO_MANY_CONNECTIONS,
            "too many requests in flight from this address: wait for one to finish",
        );
        answer.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_AFTER));
        return answer;
    };
    next.run(request).await.map(|body| GuardedBody::wrap(body, hold))
}

/// Middleware for routes whose body is JSON: a declared `Content-Length` above the limit
/// answers 413 `request.too_large` before the body is read (the body limit itself still
/// counts the bytes of a body sent without a length).
pub async fn refuse_declared_oversize(request: Request, next: Next) -> Response {
    let limit = request.extensions().get::<JsonBodyLimit>().map(|limit| limit.0);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    match (limit, declared) {
        (Some(limit), Some(declared)) if declared > limit as u64 => {
            let mut answer = error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                codes::REQUEST_TOO_LARGE,
                &format!("the body is over the limit of {limit} bytes"),
            );
            close_after(&mut answer, request.version());
            answer
        }
        _ => next.run(request).await,
    }
}

/// Asks an HTTP/1 client to open a new connection: the unread rest of the body is still on
/// this one.
fn close_after(response: &mut Response, version: Version) {
    if version <= Version::HTTP_11 {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}

/// Routes whose segment after the prefix is a bearer credential, with the word the log shows
/// in its place: download, media, archive and signed blob tokens, and share codes (the API's visitor, owner and
/// administrator routes, and the web app's share page), each of which lets its holder read.
const CREDENTIAL_SEGMENTS: &[(&str, &str)] = &[
    ("/api/v1/file/download/", "token"),
    ("/api/v1/file/media/", "token"),
    ("/api/v1/file/archive/", "token"),
    ("/api/v1/file/blob/", "token"),
    ("/api/v1/share/", "code"),
    ("/api/v1/admin/share/", "code"),
    ("/share/", "code"),
];

/// `path` as it may be logged: a credential segment (see [`CREDENTIAL_SEGMENTS`]) is replaced by
/// a short hash of it, enough to match log lines of one credential, useless to download with;
/// the rest of the path is kept. The `POST` of the download route names a file id, which is kept.
pub fn loggable_path(path: &str) -> Cow<'_, str> {
    for (prefix, word) in CREDENTIAL_SEGMENTS {
        let Some(rest) = path.strip_prefix(prefix) else { continue };
        let (secret, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if secret.is_empty() || uuid::Uuid::try_parse(secret).is_ok() {
            return Cow::Borrowed(path);
        }
        let digest = blake3::hash(secret.as_bytes()).to_hex();
        return Cow::Owned(format!("{prefix}[{word}:{}]{tail}", &digest.as_str()[..12]));
    }
    Cow::Borrowed(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_tokens_never_reach_the_log_whole() {
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
        let logged = loggable_path(&format!("/api/v1/file/download/{token}")).into_owned();
        assert!(logged.starts_with("/api/v1/file/download/[token:"), "{logged}");
        assert!(!logged.contains("eyJ"), "no piece of the token: {logged}");
        assert_eq!(logged, loggable_path(&format!("/api/v1/file/download/{token}")), "stable per token");
        assert_ne!(logged, loggable_path("/api/v1/file/download/another.token.value"));
    }

    #[test]
    fn archive_tokens_and_share_codes_never_reach_the_log_whole() {
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJhcmNoaXZlIjoxfQ.c2lnbmF0dXJl";
        let logged = loggable_path(&format!("/api/v1/file/archive/{token}")).into_owned();
        assert!(logged.starts_with("/api/v1/file/archive/[token:"), "{logged}");
        assert!(!logged.contains("eyJ"), "{logged}");
        let code = "Kq3xZ8pW";
        for (path, kept_prefix, kept_tail) in [
            (format!("/api/v1/share/{code}"), "/api/v1/share/[code:", ""),
            (format!("/api/v1/share/{code}/children/photos/a.jpg"), "/api/v1/share/[code:", "]/children/photos/a.jpg"),
            (
                format!("/api/v1/share/{code}/download/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"),
                "/api/v1/share/[code:",
                "]/download/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            ),
            (format!("/api/v1/admin/share/{code}"), "/api/v1/admin/share/[code:", ""),
            (format!("/share/{code}"), "/share/[code:", ""),
        ] {
            let logged = loggable_path(&path).into_owned();
            assert!(!logged.contains(code), "{path} logged as {logged}");
            assert!(logged.starts_with(kept_prefix) && logged.ends_with(kept_tail), "{path} logged as {logged}");
        }
        assert_eq!(
            loggable_path("/share/a1"),
            loggable_path("/api/v1/share/a1").replace("/api/v1", ""),
            "one hash per code"
        );
    }

    #[test]
    fn other_paths_and_file_ids_are_logged_as_they_are() {
        let id = "/api/v1/file/download/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        assert_eq!(loggable_path(id), id);
        assert_eq!(loggable_path("/api/v1/file/source/abc/name.txt"), "/api/v1/file/source/abc/name.txt");
        assert_eq!(loggable_path("/api/v1/file/download/"), "/api/v1/file/download/");
        assert_eq!(loggable_path("/api/v1/share"), "/api/v1/share", "the list of the caller's shares");
        assert_eq!(loggable_path("/api/v1/file/archive"), "/api/v1/file/archive");
    }
}
