//! `GET`/`HEAD /api/v1/slave/download/{credential}`: streams one blob (or one `Range` of it) to
//! a client holding a download credential for this node, with `Content-Disposition` from the
//! credential's file name. Never buffers the blob.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nubo_common::http::attachment_disposition;
use nubo_common::storage::{BlobStore, ByteRange, StorageKey};
use nubo_protocol::credential::{self, DownloadGrant};
use nubo_protocol::unix_now;

use crate::error::ApiError;
use crate::state::Shared;

pub async fn download(
    State(node): State<Shared>,
    Path(token): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let grant = credential::verify::<DownloadGrant>(&node.key, &token, &node.node_id, unix_now())?;
    let key = StorageKey::parse(&grant.storage_key)?;
    let size = node.store.size(&key).await?.ok_or_else(|| ApiError::not_found("blob.not_found", "no such blob"))?;
    if grant.size.is_some_and(|expected| expected != size) {
        // The credential was made for other content: serving this blob would be a surprise.
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "blob.changed",
            "the blob is not the one the link was made for",
        ));
    }
    let requested = match headers.get(header::RANGE).map(HeaderValue::to_str) {
        None => None,
        Some(Ok(value)) => requested_range(value, size)?,
        Some(Err(_)) => return Err(unsatisfiable(size)),
    };
    // A credential limited to some bytes serves those bytes, and no others.
    let range = match (grant.range, requested) {
        (None, range) => range,
        (Some(allowed), None) => Some((allowed.start, allowed.end.min(size.saturating_sub(1)))),
        (Some(allowed), Some((start, end))) if allowed.contains(start, end) => Some((start, end)),
        (Some(_), Some(_)) => {
            return Err(ApiError::forbidden("credential.range", "the credential does not cover these bytes"));
        }
    };
    if range.is_some_and(|(start, end)| start > end || end >= size) {
        return Err(unsatisfiable(size));
    }

    let content_type = grant
        .content_type
        .clone()
        .unwrap_or_else(|| mime_guess::from_path(&grant.file_name).first_or_octet_stream().to_string());
    let (status, length) = match range {
        Some((start, end)) => (StatusCode::PARTIAL_CONTENT, end - start + 1),
        None => (StatusCode::OK, size),
    };
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        let range = range.map(|(start, end)| ByteRange { start, end_inclusive: end });
        Body::from_stream(node.store.get(&key, range).await?)
    };
    let mut response = (status, body).into_response();
    let out = response.headers_mut();
    out.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    out.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        out.insert(header::CONTENT_TYPE, value);
    }
    if let Ok(value) = HeaderValue::from_str(&attachment_disposition(&grant.file_name)) {
        out.insert(header::CONTENT_DISPOSITION, value);
    }
    if let Some((start, end)) = range
        && let Ok(value) = HeaderValue::from_str(&format!("bytes {start}-{end}/{size}"))
    {
        out.insert(header::CONTENT_RANGE, value);
    }
    Ok(response)
}

/// The single range asked for, `None` to send the whole blob (several ranges are answered with
/// the whole blob, which HTTP allows), or 416 when nothing asked for exists.
fn requested_range(value: &str, size: u64) -> Result<Option<(u64, u64)>, ApiError> {
    let parsed = http_range_header::parse_range_header(value).map_err(|_| unsatisfiable(size))?;
    if size == 0 {
        return Err(unsatisfiable(size));
    }
    let ranges = parsed.validate(size).map_err(|_| unsatisfiable(size))?;
    match ranges.as_slice() {
        [single] => Ok(Some((*single.start(), *single.end()))),
        _ => Ok(None),
    }
}

fn unsatisfiable(size: u64) -> ApiError {
    let mut error = ApiError::new(
        StatusCode::RANGE_NOT_SATISFIABLE,
        "download.range",
        format!("the requested range is not satisfiable (the blob has {size} bytes)"),
    );
    error.content_range = Some(format!("bytes */{size}"));
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_is_served_and_impossible_ones_are_refused() {
        assert_eq!(requested_range("bytes=2-5", 10).unwrap(), Some((2, 5)));
        assert_eq!(requested_range("bytes=-3", 10).unwrap(), Some((7, 9)));
        assert_eq!(requested_range("bytes=0-1,4-5", 10).unwrap(), None);
        assert!(requested_range("bytes=20-30", 10).is_err());
        assert!(requested_range("bytes=0-0", 0).is_err());
    }
}
