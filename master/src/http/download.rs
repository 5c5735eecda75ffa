//! Serving a file over HTTP: `Range` (one range; 206 / 416), `HEAD`, `ETag` from the content
//! hash with `If-None-Match`, `Last-Modified`, `Content-Type` by extension and an RFC 6266
//! `Content-Disposition`; or a 302 when the file's store hands out direct URLs.

use std::time::{Duration, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nubo_common::storage::ByteRange;

use crate::domain::object::attachment_disposition;
use crate::service::transfers::Download;
use crate::service::{ErrorKind, ServiceError, ServiceResult};

fn header_value(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// Answers a download request for `download`.
pub async fn serve(download: Download, method: &Method, request: &HeaderMap) -> ServiceResult<Response> {
    if let Some(url) = &download.redirect {
        let mut response = StatusCode::FOUND.into_response();
        response.headers_mut().insert(header::LOCATION, header_value(url));
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Ok(response);
    }
    let etag = download.blake3.as_ref().map(|hash| format!("\"{hash}\""));
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let mime = mime_guess::from_path(&download.name).first_or_octet_stream();
    headers.insert(header::CONTENT_TYPE, header_value(mime.essence_str()));
    headers.insert(header::CONTENT_DISPOSITION, header_value(&attachment_disposition(&download.name)));
    let modified = UNIX_EPOCH + Duration::from_millis(download.updated_at.max(0) as u64);
    headers.insert(header::LAST_MODIFIED, header_value(&httpdate::fmt_http_date(modified)));
    if let Some(etag) = &etag {
        headers.insert(header::ETAG, header_value(etag));
        let matches = request
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
        if matches {
            return Ok((StatusCode::NOT_MODIFIED, headers).into_response());
        }
    }

    let range = requested_range(request, download.size)?;
    let (status, length) = match range {
        Some(range) => {
            let content_range = format!("bytes {}-{}/{}", range.start, range.end_inclusive, download.size);
            headers.insert(header::CONTENT_RANGE, header_value(&content_range));
            (StatusCode::PARTIAL_CONTENT, range.len())
        }
        None => (StatusCode::OK, download.size),
    };
    headers.insert(header::CONTENT_LENGTH, header_value(&length.to_string()));
    if method == Method::HEAD || length == 0 {
        return Ok((status, headers, Body::empty()).into_response());
    }
    let stream = download.store.get(&download.key, range).await?;
    Ok((status, headers, Body::from_stream(stream)).into_response())
}

/// The single range asked for, `None` for the whole file (no `Range`, an unreadable one, or
/// several ranges, which RFC 9110 lets a server answer with the whole content).
fn requested_range(request: &HeaderMap, size: u64) -> ServiceResult<Option<ByteRange>> {
    let Some(value) = request.get(header::RANGE).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    let Ok(parsed) = http_range_header::parse_range_header(value) else { return Ok(None) };
    match parsed.validate(size) {
        Ok(ranges) if ranges.len() == 1 => {
            let range = &ranges[0];
            Ok(Some(ByteRange { start: *range.start(), end_inclusive: *range.end() }))
        }
        Ok(_) => Ok(None),
        Err(_) => Err(range_not_satisfiable(size)),
    }
}

fn range_not_satisfiable(size: u64) -> ServiceError {
    let mut err = ServiceError::new(
        ErrorKind::RangeNotSatisfiable,
        "download.range_not_satisfiable",
        format!("the requested range lies outside the {size}-byte file"),
    );
    err.content_range = Some(format!("bytes */{size}"));
    err
}
