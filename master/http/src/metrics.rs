//! `GET /metrics`: the master's series in the Prometheus text format, for a scraper holding the
//! `metrics_token`; and which routes carry file bytes, for the byte counters.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use nubo_common::metrics::{Access, TEXT_FORMAT, Transfer, check_bearer};

use crate::error::ApiResult;
use crate::error::ErrorBody;
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;
use nubo_service::ops::metrics;

/// The routes whose request or response body is file content, by route template: chunks,
/// content writes, WebDAV and WOPI writes up; downloads, source links, signed blob URLs,
/// archives, WebDAV and WOPI reads down.
pub fn classify_transfer(method: &Method, route: &str) -> Option<Transfer> {
    let dav = route == crate::dav::PREFIX || route.starts_with("/dav/");
    match *method {
        Method::PUT if route == "/api/v1/file/upload/{id}/{index}" || dav => Some(Transfer::Upload),
        Method::PATCH | Method::POST if route == "/api/v1/file/content" => Some(Transfer::Upload),
        Method::POST if route == "/wopi/files/{id}/contents" => Some(Transfer::Upload),
        Method::GET
            if dav
                || matches!(
                    route,
                    "/api/v1/file/download/{id}"
                        | "/api/v1/file/media/{id}"
                        | "/api/v1/file/source/{id}/{name}"
                        | "/api/v1/file/blob/{token}"
                        | "/api/v1/file/archive/{token}"
                        | "/wopi/files/{id}/contents"
                ) =>
        {
            Some(Transfer::Download)
        }
        _ => None,
    }
}

/// The master's metrics. Off unless `metrics_token` is set (404 then, as for any unknown path);
/// with it, the token is required as a bearer token.
#[utoipa::path(get, path = "/metrics", tag = "site", security(("metrics_token" = [])),
    responses(
        (status = 200, description = "Every series in the Prometheus text format (docs/src/admin/metrics.md)", content_type = "text/plain", body = String),
        (status = 401, description = "No token or the wrong one (`auth.missing_token`, `auth.invalid_token`)", body = ErrorBody),
        (status = 404, description = "Metrics are off (`route.not_found`)", body = ErrorBody),
        (status = 500, description = "Internal error", body = ErrorBody),
    ))]
pub async fn scrape(State(state): State<Context>, headers: HeaderMap) -> ApiResult<Response> {
    let Some(instruments) = state.instruments() else {
        return Err(ServiceError::not_found(codes::ROUTE_NOT_FOUND, "no route for GET /metrics").into());
    };
    match check_bearer(&headers, &instruments.token) {
        Access::Granted => {}
        Access::Missing => {
            return Err(ServiceError::new(
                ErrorKind::Unauthorized,
                codes::AUTH_MISSING_TOKEN,
                "the metrics token is required",
            )
            .into());
        }
        Access::Wrong => {
            return Err(
                ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_INVALID_TOKEN, "wrong metrics token").into()
            );
        }
    }
    let text = metrics::render(&state, instruments).await?;
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT))], text).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_bytes_are_counted_on_the_transfer_routes_only() {
        assert_eq!(classify_transfer(&Method::PUT, "/api/v1/file/upload/{id}/{index}"), Some(Transfer::Upload));
        assert_eq!(classify_transfer(&Method::PUT, "/dav/{*path}"), Some(Transfer::Upload));
        assert_eq!(classify_transfer(&Method::GET, "/dav/{*path}"), Some(Transfer::Download));
        assert_eq!(classify_transfer(&Method::GET, "/api/v1/file/download/{id}"), Some(Transfer::Download));
        assert_eq!(classify_transfer(&Method::GET, "/api/v1/file/media/{id}"), Some(Transfer::Download));
        assert_eq!(classify_transfer(&Method::POST, "/api/v1/file/download/{id}"), None, "creating a token");
        assert_eq!(classify_transfer(&Method::GET, "/api/v1/directory/{*path}"), None);
        assert_eq!(classify_transfer(&Method::from_bytes(b"PROPFIND").unwrap(), "/dav/{*path}"), None);
    }
}
