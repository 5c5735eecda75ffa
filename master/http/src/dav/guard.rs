//! Checks on a `/dav` request made before dav-server sees it, where dav-server would do
//! something else than Nubo documents: partial writes, a path above `/dav`, a `Destination`
//! on another host or inside its own source, a `PROPFIND` without `Depth`, an oversized lock
//! owner. Each answers the uniform JSON error, and nothing has changed when it does.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};
use dav_server::davpath::DavPath;

use super::PREFIX;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;

/// The largest lock `<owner>` element kept (as serialised XML). Clients put a name or a URL
/// there; each lock's owner is stored and repeated in every `lockdiscovery`.
pub const MAX_LOCK_OWNER: usize = 4 * 1024;
/// The largest `LOCK` body read: an owner at its limit plus the rest of a `lockinfo`, with room.
pub const LOCK_BODY_LIMIT: usize = 16 * 1024;

/// The request path below `/dav`; a path that climbs above `/dav` (`/dav/../x`) or does not
/// decode is refused with 400 rather than dav-server's 502, and so is one whose decoded bytes
/// are not UTF-8 (`%FF`, the overlong `%C0%AF`) or hold a NUL: no name can be either.
pub fn request_path(uri: &Uri) -> Result<DavPath, ServiceError> {
    let path = DavPath::new(uri.path()).and_then(|mut path| path.set_prefix(PREFIX).map(|()| path)).map_err(|_| {
        ServiceError::new(ErrorKind::BadRequest, codes::DAV_BAD_REQUEST, "the request path does not lie inside /dav")
    })?;
    refuse_undecodable(&path, "the request path")?;
    Ok(path)
}

/// Refuses a decoded path that is not UTF-8 or holds a NUL (`what` names it in the message).
fn refuse_undecodable(path: &DavPath, what: &str) -> Result<(), ServiceError> {
    match std::str::from_utf8(path.as_bytes()) {
        Ok(text) if !text.contains('\0') => Ok(()),
        _ => Err(ServiceError::new(
            ErrorKind::BadRequest,
            codes::DAV_BAD_REQUEST,
            format!("{what} is not UTF-8 text without NUL characters"),
        )),
    }
}

/// Partial writes would need the old content rewritten in place, which Nubo's writes (whole
/// new content, swapped in at the end) do not do: `PUT` with `Content-Range` and the SabreDAV
/// `PATCH` are refused whole (dav-server would otherwise write the range as the whole file).
pub fn refuse_partial_write(method: &Method, headers: &HeaderMap) -> Result<(), ServiceError> {
    let partial_put = method == Method::PUT && headers.contains_key(header::CONTENT_RANGE);
    if partial_put || method == Method::PATCH {
        return Err(ServiceError::new(
            ErrorKind::NotImplemented,
            codes::DAV_NOT_IMPLEMENTED,
            "partial writes (PUT with Content-Range, PATCH) are not supported: send the whole file",
        ));
    }
    Ok(())
}

/// RFC 4918 (10.2): a `PROPFIND` without `Depth` means infinity, which is refused like an
/// explicit one (dav-server treats it as 1).
pub fn default_propfind_depth(request: &mut Request) {
    if request.method().as_str() == "PROPFIND" && !request.headers().contains_key("depth") {
        request.headers_mut().insert("depth", HeaderValue::from_static("infinity"));
    }
}

fn destination_outside() -> ServiceError {
    ServiceError::new(
        ErrorKind::BadGateway,
        codes::DAV_DESTINATION_OUTSIDE,
        "the destination is not inside this WebDAV endpoint",
    )
}

/// The `Destination` of a `COPY`/`MOVE` as a path below `/dav`; `None` for other methods or
/// without the header (dav-server answers 400 then). A destination on another host than the
/// request's (`Host`, or `X-Forwarded-Host` behind a proxy) or above `/dav` answers 502
/// `dav.destination_outside`: dav-server would ignore the host and act locally.
pub fn destination(method: &Method, headers: &HeaderMap) -> Result<Option<DavPath>, ServiceError> {
    if !matches!(method.as_str(), "COPY" | "MOVE") {
        return Ok(None);
    }
    let Some(value) = headers.get("destination").and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let unreadable = || {
        ServiceError::new(ErrorKind::BadRequest, codes::DAV_BAD_REQUEST, "the Destination header is not a valid path")
    };
    let uri: Uri = value.parse().map_err(|_| unreadable())?;
    if let Some(authority) = uri.authority() {
        let named = |name: &str| {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .any(|host| host.trim().eq_ignore_ascii_case(authority.as_str()))
        };
        if !named("host") && !named("x-forwarded-host") {
            return Err(destination_outside());
        }
    }
    let mut path = DavPath::new(uri.path()).map_err(|_| unreadable())?;
    path.set_prefix(PREFIX).map_err(|_| destination_outside())?;
    refuse_undecodable(&path, "the Destination header")?;
    Ok(Some(path))
}

/// A folder copied or moved into itself or below itself: refused with 409 as the REST API
/// does (dav-server would copy the folder into its own subtree). `source_is_folder` is asked
/// only when the destination lies below the source.
pub async fn refuse_cycle(
    method: &Method,
    source: &DavPath,
    destination: &DavPath,
    source_is_folder: impl Future<Output = bool>,
) -> Result<(), ServiceError> {
    let (from, to) = (super::segments(source), super::segments(destination));
    if to.len() <= from.len() || !to.starts_with(&from) || !source_is_folder.await {
        return Ok(());
    }
    Err(if method.as_str() == "MOVE" {
        ServiceError::conflict(codes::OBJECT_MOVE_CYCLE, "a folder cannot move into itself or its descendants")
    } else {
        ServiceError::conflict(codes::OBJECT_COPY_CYCLE, "a folder cannot be copied into itself or its descendants")
    })
}

/// The size of the `<owner>` of a `LOCK` body, serialised as it would be stored; 0 without
/// one or for a body that does not parse (dav-server answers that).
fn owner_size(body: &[u8]) -> usize {
    let Ok(root) = xmltree::Element::parse(body) else { return 0 };
    let Some(owner) = root.get_child("owner") else { return 0 };
    let mut xml = Vec::new();
    match owner.write(&mut xml) {
        Ok(()) => xml.len(),
        Err(_) => usize::MAX,
    }
}

/// Refuses a `LOCK` whose owner is over [`MAX_LOCK_OWNER`] (413 `dav.lock_owner_too_large`).
pub fn check_lock_body(body: &[u8]) -> Result<(), ServiceError> {
    if owner_size(body) > MAX_LOCK_OWNER {
        return Err(ServiceError::new(
            ErrorKind::PayloadTooLarge,
            codes::DAV_LOCK_OWNER_TOO_LARGE,
            format!("the lock owner is larger than {MAX_LOCK_OWNER} bytes"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_destination_on_the_requests_host_is_a_path_below_dav() {
        let on_host = headers(&[("host", "nubo.example:8080"), ("destination", "http://NUBO.example:8080/dav/a%20b")]);
        let path = destination(&Method::from_bytes(b"COPY").unwrap(), &on_host).unwrap().unwrap();
        assert_eq!(super::super::segments(&path), ["a b"]);
        let bare = headers(&[("host", "x"), ("destination", "/dav/c")]);
        assert!(destination(&Method::from_bytes(b"MOVE").unwrap(), &bare).unwrap().is_some());
        let proxied = headers(&[
            ("host", "internal:80"),
            ("x-forwarded-host", "nubo.example"),
            ("destination", "https://nubo.example/dav/d"),
        ]);
        assert!(destination(&Method::from_bytes(b"MOVE").unwrap(), &proxied).is_ok());
    }

    #[test]
    fn a_destination_elsewhere_is_outside() {
        let copy = Method::from_bytes(b"COPY").unwrap();
        for target in ["http://evil.example/dav/x", "http://nubo.example:81/dav/x", "/x", "/dav/../x"] {
            let map = headers(&[("host", "nubo.example"), ("destination", target)]);
            let error = destination(&copy, &map).expect_err(target);
            assert_eq!(error.code, codes::DAV_DESTINATION_OUTSIDE, "{target}");
        }
    }

    #[test]
    fn an_owner_is_measured_as_stored() {
        let small =
            br#"<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:owner>ada</D:owner></D:lockinfo>"#;
        assert!(check_lock_body(small).is_ok());
        let big = format!(
            r#"<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:owner>{}</D:owner></D:lockinfo>"#,
            "x".repeat(MAX_LOCK_OWNER)
        );
        assert_eq!(check_lock_body(big.as_bytes()).unwrap_err().code, codes::DAV_LOCK_OWNER_TOO_LARGE);
    }
}
