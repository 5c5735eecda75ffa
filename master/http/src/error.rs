//! Rendering of every failure as the uniform JSON error body
//! `{"code", "message", "field"?, "request_id"}`: errors raised by the service layer, rejected
//! extractors, and responses the framework or a middleware produced on its own (405, 413, a
//! panic...), which [`uniform_errors`] rewrites so no client ever sees another shape.

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;

/// Response header carrying the request id; also accepted from a trusted proxy.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

tokio::task_local! {
    /// The id of the request being handled, so every error body can name it.
    static REQUEST_ID: String;
}

/// The body of every error answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code, `area.snake_case` (e.g. `route.not_found`).
    pub code: String,
    /// Human-readable explanation, safe to show to the user.
    pub message: String,
    /// The request field the error is about, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The id of this request (also in the `x-request-id` header), for support and logs.
    pub request_id: String,
}

/// Marks a response whose body is already the uniform error body.
#[derive(Clone, Copy)]
struct RenderedError;

/// Marks `response` as carrying its own error body (a protocol envelope), so the uniform-errors
/// layer leaves it as it is.
pub fn mark_rendered(response: &mut Response) {
    response.extensions_mut().insert(RenderedError);
}

pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        ErrorKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorKind::Validation => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::PreconditionRequired => StatusCode::PRECONDITION_REQUIRED,
        ErrorKind::NotImplemented => StatusCode::NOT_IMPLEMENTED,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::BadGateway => StatusCode::BAD_GATEWAY,
        ErrorKind::Gone => StatusCode::GONE,
        ErrorKind::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
        ErrorKind::QuotaExceeded => StatusCode::INSUFFICIENT_STORAGE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub(crate) fn current_request_id() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_default()
}

fn render(status: StatusCode, code: String, message: String, field: Option<String>) -> Response {
    let body = ErrorBody { code, message, field, request_id: current_request_id() };
    let mut response = (status, Json(body)).into_response();
    response.extensions_mut().insert(RenderedError);
    response
}

/// A [`ServiceError`] on its way to the client: the service floor names no web framework, so
/// the front end wraps its errors to render them (the orphan rule keeps `IntoResponse` for
/// `ServiceError` itself out of this crate).
#[derive(Debug)]
pub struct ApiError(pub ServiceError);

/// What a handler answers.
pub type ApiResult<T> = Result<T, ApiError>;

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        Self(error)
    }
}

/// Renders a bare [`ServiceError`] as [`ApiError`] does, where a front end answers with a
/// [`Response`] of its own making (WebDAV, WOPI, middleware).
pub trait ErrorResponse {
    fn into_response(self) -> Response;
}

impl ErrorResponse for ServiceError {
    fn into_response(self) -> Response {
        ApiError(self).into_response()
    }
}

impl From<nubo_common::storage::StorageError> for ApiError {
    fn from(error: nubo_common::storage::StorageError) -> Self {
        Self(error.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let ApiError(error) = self;
        let status = status_of(error.kind);
        // Logged once here, inside the request span; the client gets the generic message.
        if error.kind == ErrorKind::Internal {
            tracing::error!(error = %error, "request failed");
        } else if let Some(source) = &error.source {
            tracing::debug!(code = %error.code, cause = %source, "request refused");
        }
        let unauthorized = error.kind == ErrorKind::Unauthorized;
        let retry_after = error.retry_after;
        let mut response = render(status, error.code.into_owned(), error.message.into_owned(), error.field);
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if unauthorized && !response.headers().contains_key(header::WWW_AUTHENTICATE) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// An error answer with the uniform body for a status the service vocabulary has no kind for
/// (WebDAV's 412, 423...).
pub fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    render(status, code.to_owned(), message.to_owned(), None)
}

/// Stable code and message for an error response the framework produced without a body of ours.
fn code_for_status(status: StatusCode) -> (String, String) {
    let (code, message) = match status {
        StatusCode::NOT_FOUND => (codes::ROUTE_NOT_FOUND, "no such route"),
        StatusCode::METHOD_NOT_ALLOWED => (codes::ROUTE_METHOD_NOT_ALLOWED, "method not allowed on this route"),
        StatusCode::PAYLOAD_TOO_LARGE => (codes::REQUEST_TOO_LARGE, "request body is too large"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (codes::REQUEST_UNSUPPORTED_MEDIA_TYPE, "unsupported content type"),
        StatusCode::REQUEST_TIMEOUT => (codes::REQUEST_TIMEOUT, "request took too long"),
        StatusCode::INTERNAL_SERVER_ERROR => (codes::SERVER_INTERNAL, "internal server error"),
        other => {
            let reason = other.canonical_reason().unwrap_or("error");
            return (format!("http.{}", other.as_u16()), reason.to_lowercase());
        }
    };
    (code.to_owned(), message.to_owned())
}

/// Middleware: makes the request id available to error rendering and rewrites any error
/// response not produced by [`ServiceError`] into the uniform body, keeping its headers
/// (e.g. `Allow` on a 405).
pub async fn uniform_errors(request: Request, next: Next) -> Response {
    let request_id =
        request.headers().get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    REQUEST_ID
        .scope(request_id, async move {
            let response = next.run(request).await;
            let status = response.status();
            if !(status.is_client_error() || status.is_server_error())
                || response.extensions().get::<RenderedError>().is_some()
            {
                return response;
            }
            let (mut parts, _body) = response.into_parts();
            let (code, message) = code_for_status(status);
            let rendered = render(status, code, message, None);
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::CONTENT_TYPE);
            let (rendered_parts, body) = rendered.into_parts();
            parts.headers.extend(rendered_parts.headers);
            parts.extensions.extend(rendered_parts.extensions);
            Response::from_parts(parts, body)
        })
        .await
}

/// Converts a caught panic into a logged 500 with the uniform body.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic")
        .to_owned();
    ServiceError::internal(anyhow::anyhow!("handler panicked: {detail}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vocabulary keeps 501 `route.not_implemented` for an operation named before it is
    /// built (none is today): it answers with the uniform body like every other refusal.
    #[tokio::test]
    async fn a_route_named_before_it_is_built_answers_501_with_the_uniform_body() {
        let refusal =
            ServiceError::new(ErrorKind::NotImplemented, codes::ROUTE_NOT_IMPLEMENTED, "not built yet: shares");
        let response = refusal.into_response();
        assert_eq!(response.status(), StatusCode::NOT_IMPLEMENTED);
        let body = axum::body::to_bytes(response.into_body(), 64 * 1024).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["code"], codes::ROUTE_NOT_IMPLEMENTED);
        assert_eq!(body["message"], "not built yet: shares");
    }
}
