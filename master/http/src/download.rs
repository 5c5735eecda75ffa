//! Serving a file over HTTP: `Range` (one range; 206 / 416), `HEAD`, `ETag` from the content
//! hash with `If-None-Match`, `Last-Modified`, `Content-Type` by extension and an RFC 6266
//! `Content-Disposition`; or a 302 when the file's store hands out direct URLs. Users' files are
//! served from the API's own origin, so every answer also forbids sniffing and carries a
//! sandboxing CSP: an uploaded HTML or SVG file must never run as a page of this origin.

use std::time::{Duration, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_range_header::{EndPosition, RangeUnsatisfiableError, StartPosition};
use nubo_common::storage::ByteRange;
use nubo_model::domain::object::attachment_disposition;

use crate::content_safety;
use crate::error::ApiResult;
use crate::error::ErrorResponse;
use nubo_service::content::downloads::Download;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;

fn header_value(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// Answers a download request for `download`.
pub async fn serve(download: Download, method: &Method, request: &HeaderMap) -> ApiResult<Response> {
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
    // Every download is already an attachment; this adds nosniff and the sandboxing CSP.
    content_safety::harden_file_response(&mut headers);
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

    let range = match requested_range(request, download.size) {
        Ok(range) => range,
        Err(unsatisfiable) => return Ok(unsatisfiable.into_response()),
    };
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

/// The single range asked for, `None` for the whole file. RFC 9110 §14: no `Range` or an
/// unreadable one is ignored; several ranges (overlapping or not) get the whole file, which a
/// server may always answer; a suffix longer than the file is the whole file (206); `bytes=-0`,
/// a first position past the end or a last position before the first are unsatisfiable (416).
fn requested_range(request: &HeaderMap, size: u64) -> Result<Option<ByteRange>, RangeNotSatisfiable> {
    let Some(value) = request.get(header::RANGE).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    let parsed = match http_range_header::parse_range_header(value) {
        Ok(parsed) => parsed,
        Err(RangeUnsatisfiableError::ZeroSuffix) => return Err(RangeNotSatisfiable { size }),
        Err(_) => return Ok(None),
    };
    let [spec] = parsed.ranges.as_slice() else { return Ok(None) };
    let Some(last) = size.checked_sub(1) else {
        // An empty file has no byte to start at; a suffix of it is all of it (nothing).
        return match spec.start {
            StartPosition::FromLast(_) => Ok(None),
            StartPosition::Index(_) => Err(RangeNotSatisfiable { size }),
        };
    };
    let (start, end_inclusive) = match (spec.start, spec.end) {
        (StartPosition::FromLast(suffix), _) => (size.saturating_sub(suffix), last),
        (StartPosition::Index(start), _) if start > last => return Err(RangeNotSatisfiable { size }),
        (StartPosition::Index(start), EndPosition::Index(end)) if end < start => {
            return Err(RangeNotSatisfiable { size });
        }
        (StartPosition::Index(start), EndPosition::Index(end)) => (start, end.min(last)),
        (StartPosition::Index(start), EndPosition::LastByte) => (start, last),
    };
    Ok(Some(ByteRange { start, end_inclusive }))
}

/// A range that lies outside a file of `size` bytes: answered 416 with `Content-Range: bytes */size`.
#[derive(Debug, PartialEq, Eq)]
struct RangeNotSatisfiable {
    size: u64,
}

impl IntoResponse for RangeNotSatisfiable {
    fn into_response(self) -> Response {
        let size = self.size;
        let error = ServiceError::new(
            ErrorKind::RangeNotSatisfiable,
            codes::DOWNLOAD_RANGE_NOT_SATISFIABLE,
            format!("the requested range lies outside the {size}-byte file"),
        );
        let mut response = error.into_response();
        response.headers_mut().insert(header::CONTENT_RANGE, header_value(&format!("bytes */{size}")));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(value: &str, size: u64) -> Result<Option<(u64, u64)>, String> {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_str(value).unwrap());
        requested_range(&headers, size)
            .map(|r| r.map(|r| (r.start, r.end_inclusive)))
            .map_err(|_| codes::DOWNLOAD_RANGE_NOT_SATISFIABLE.to_owned())
    }

    #[test]
    fn ranges_follow_rfc_9110() {
        assert_eq!(range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(range("bytes=90-200", 100), Ok(Some((90, 99))), "a last position past the end is cut");
        assert_eq!(range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(range("bytes=-1000", 100), Ok(Some((0, 99))), "a longer suffix is the whole file");
        assert_eq!(range("bytes=0-10, 5-20", 100), Ok(None), "overlapping ranges get the whole file");
        assert_eq!(range("bytes=0-1, 5-6", 100), Ok(None), "several ranges get the whole file");
        assert_eq!(range("items=0-1", 100), Ok(None), "another unit is ignored");
        assert_eq!(range("bytes=-0", 100).unwrap_err(), codes::DOWNLOAD_RANGE_NOT_SATISFIABLE);
        assert_eq!(range("bytes=100-", 100).unwrap_err(), codes::DOWNLOAD_RANGE_NOT_SATISFIABLE);
        assert_eq!(range("bytes=9-3", 100).unwrap_err(), codes::DOWNLOAD_RANGE_NOT_SATISFIABLE);
    }

    #[test]
    fn an_empty_file_has_no_byte_to_start_at() {
        assert_eq!(range("bytes=0-", 0).unwrap_err(), codes::DOWNLOAD_RANGE_NOT_SATISFIABLE);
        assert_eq!(range("bytes=-5", 0), Ok(None));
    }
}
