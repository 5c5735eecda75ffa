//! Every data-plane failure as the uniform JSON body `{code, message}` with its HTTP status:
//! errors of our handlers, and responses the framework produced on its own (405, 413, a rejected
//! path, a panic), which [`uniform_errors`] rewrites. Codes are stable `area.snake_case` strings;
//! internal causes go to the log, never the client.

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use nubo_common::storage::StorageError;
use nubo_protocol::credential::CredentialError;
use serde::Serialize;

/// The body of every error answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// A refusal or failure of a data-plane request.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// `Content-Range` to send along (`bytes */<size>` on a 416).
    pub content_range: Option<String>,
}

/// Marks a response whose body is already the uniform error body (or an RPC envelope).
#[derive(Debug, Clone, Copy)]
pub struct Rendered;

impl ApiError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { status, code: code.into(), message: message.into(), content_range: None }
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn forbidden(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }

    /// A fault on this side: the cause is logged here, the client gets a generic message.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "request failed");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
    }
}

impl From<CredentialError> for ApiError {
    fn from(error: CredentialError) -> Self {
        tracing::warn!(code = error.code(), "credential refused");
        // A forged or garbled token is unauthenticated; a genuine one used beyond its scope is forbidden.
        let status = match error {
            CredentialError::Malformed | CredentialError::BadSignature | CredentialError::Expired => {
                StatusCode::UNAUTHORIZED
            }
            CredentialError::WrongNode | CredentialError::WrongScope => StatusCode::FORBIDDEN,
        };
        Self::new(status, error.code(), error.to_string())
    }
}

impl From<StorageError> for ApiError {
    fn from(error: StorageError) -> Self {
        let (status, code) = match &error {
            StorageError::NotFound(_) => (StatusCode::NOT_FOUND, "blob.not_found"),
            StorageError::AlreadyExists(_) => (StatusCode::CONFLICT, "blob.exists"),
            StorageError::InvalidKey(_) => (StatusCode::BAD_REQUEST, "blob.invalid_key"),
            StorageError::ChunkOutOfRange { .. } => (StatusCode::BAD_REQUEST, "upload.chunk_out_of_range"),
            StorageError::LengthMismatch { .. } => (StatusCode::BAD_REQUEST, "upload.chunk_length"),
            StorageError::TooLarge { .. } | StorageError::SizeUnsupported { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "upload.too_large")
            }
            StorageError::Body(_) => (StatusCode::BAD_REQUEST, "upload.body"),
            StorageError::Unavailable(_) => {
                tracing::warn!(error = %error, "storage unavailable");
                return Self::new(StatusCode::SERVICE_UNAVAILABLE, "storage.unavailable", "storage is unavailable");
            }
            StorageError::Failed(_) => return Self::internal(&error),
        };
        Self::new(status, code, error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let mut response = (status, Json(ErrorBody { code: self.code, message: self.message })).into_response();
        response.extensions_mut().insert(Rendered);
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(range) = self.content_range.and_then(|range| HeaderValue::from_str(&range).ok()) {
            response.headers_mut().insert(header::CONTENT_RANGE, range);
        }
        response
    }
}

/// Stable code and message for an error response the framework produced without a body of ours.
fn code_for_status(status: StatusCode) -> (String, String) {
    let (code, message) = match status {
        StatusCode::NOT_FOUND => ("route.not_found", "no such endpoint"),
        StatusCode::METHOD_NOT_ALLOWED => ("route.method_not_allowed", "method not allowed on this endpoint"),
        StatusCode::PAYLOAD_TOO_LARGE => ("request.too_large", "request body is too large"),
        StatusCode::BAD_REQUEST => ("request.invalid", "the request is malformed"),
        StatusCode::INTERNAL_SERVER_ERROR => ("internal", "internal error"),
        other => {
            let reason = other.canonical_reason().unwrap_or("error");
            return (format!("http.{}", other.as_u16()), reason.to_lowercase());
        }
    };
    (code.to_owned(), message.to_owned())
}

/// Middleware: rewrites any error response not rendered by [`ApiError`] (or the RPC handler)
/// into the uniform body, keeping its headers (e.g. `Allow` on a 405).
pub async fn uniform_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || response.extensions().get::<Rendered>().is_some() {
        return response;
    }
    let (mut parts, _body) = response.into_parts();
    let (code, message) = code_for_status(status);
    let (rendered_parts, body) = ApiError::new(status, code, message).into_response().into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.extend(rendered_parts.headers);
    Response::from_parts(parts, body)
}

/// Middleware: a body that delivers no byte for `timeout` while a handler waits for it fails
/// the read, and the request answers 408 `request.timeout` whatever the handler made of it.
pub async fn body_progress(
    axum::extract::State(timeout): axum::extract::State<Option<std::time::Duration>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(timeout) = timeout else { return next.run(request).await };
    let (parts, body) = request.into_parts();
    let (body, stalled) = nubo_common::serve::ProgressBody::new(body, timeout);
    let response = next.run(Request::from_parts(parts, axum::body::Body::new(body))).await;
    let status = response.status();
    if !stalled.is_set() || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let message = format!("the request body stopped arriving for {} seconds", timeout.as_secs());
    let mut answer = ApiError::new(StatusCode::REQUEST_TIMEOUT, "request.timeout", message).into_response();
    answer.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    answer
}

/// Converts a caught panic into a logged 500 with the uniform body.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    ApiError::internal(format!("handler panicked: {detail}")).into_response()
}

/// Answers a route no handler serves with the uniform body.
pub async fn no_route() -> ApiError {
    ApiError::not_found("route.not_found", "no such endpoint")
}
