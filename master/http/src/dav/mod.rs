//! The `/dav` endpoint: HTTP Basic with a WebDAV account (`{email}/{account name}`), then
//! dav-server over [`fs::NuboFs`] (Nubo's tree from the account's root, through the service
//! layer) and [`locks::KvLocks`] (locks in the shared store). Read-only accounts are refused
//! every method that changes something, with 403, before dav-server sees the request. Error
//! answers without a body of dav-server's get the uniform JSON error body; its XML error bodies
//! (`207`, lock conflicts, `propfind-finite-depth`) pass unchanged. [`guard`] refuses first
//! what dav-server would do otherwise than documented (partial writes, paths and destinations
//! outside `/dav`, copy cycles, oversized lock owners); file answers get
//! [`content_safety`]'s headers.

mod file;
mod fs;
mod guard;
mod locks;
mod propfind;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use dav_server::DavHandler;
use dav_server::davpath::DavPath;
use futures_util::StreamExt;
use headers::authorization::Basic;
use headers::{Authorization, HeaderMapExt};
use nubo_common::secret::Secret;
use nubo_model::domain::object::parse_path;

use crate::content_safety;
use crate::error::ErrorResponse;
use crate::error::{error_response, mark_rendered};
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError, ServiceResult};
use nubo_service::error_codes as codes;
use nubo_service::identity::dav_accounts::{self, DavPrincipal};
use nubo_service::{content::writes, tree::files};

/// Where the endpoint is mounted.
pub const PREFIX: &str = "/dav";
/// Bytes handed to the client per read of a file.
const READ_BUFFER: usize = 1024 * 1024;
/// The largest `PROPFIND` body read (dav-server's own limit).
const PROPFIND_BODY_LIMIT: usize = 64 * 1024;
/// Multistatus `<response>` elements sent in one piece at most (about 400 bytes each).
const MULTISTATUS_PIECES: usize = 256;

/// The names of a request path below the account root (decoded; a segment that is not UTF-8
/// becomes a name no object can have).
pub fn segments(path: &DavPath) -> Vec<&str> {
    path.as_bytes()
        .split(|&b| b == b'/')
        .filter(|segment| !segment.is_empty())
        .map(|segment| std::str::from_utf8(segment).unwrap_or("\0"))
        .collect()
}

fn changes_something(method: &Method) -> bool {
    !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS" | "PROPFIND")
}

async fn authenticate(state: &Context, credentials: Option<Authorization<Basic>>) -> ServiceResult<DavPrincipal> {
    let Some(Authorization(basic)) = credentials else {
        return Err(ServiceError::new(
            ErrorKind::Unauthorized,
            codes::AUTH_MISSING_CREDENTIALS,
            "sign in with a WebDAV account: HTTP Basic as {email}/{account name}",
        ));
    };
    dav_accounts::authenticate(state, basic.username(), &Secret::new(basic.password().to_owned())).await
}

/// Serves every method under `/dav`.
pub async fn serve(State(state): State<Context>, mut request: Request) -> Response {
    // dav-server walks a whole tree for `Depth: infinity` when this test-suite header is
    // present; without it such a PROPFIND is refused (403 propfind-finite-depth), which keeps
    // one request from listing an unbounded tree.
    request.headers_mut().remove("x-litmus");
    let credentials = request.headers().typed_get::<Authorization<Basic>>();
    let principal = match authenticate(&state, credentials).await {
        Ok(principal) => principal,
        Err(error) => {
            let unauthorized = error.kind == ErrorKind::Unauthorized;
            let mut response = error.into_response();
            if unauthorized {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"Nubo WebDAV\", charset=\"UTF-8\""),
                );
            }
            return response;
        }
    };
    if principal.read_only && changes_something(request.method()) {
        return ServiceError::new(ErrorKind::Forbidden, codes::WEBDAV_READ_ONLY, "this WebDAV account is read-only")
            .into_response();
    }
    let checked = guard::refuse_partial_write(request.method(), request.headers())
        .and_then(|()| guard::request_path(request.uri()))
        .and_then(|path| Ok((path, guard::destination(request.method(), request.headers())?)));
    let (request_path, destination) = match checked {
        Ok(checked) => checked,
        Err(error) => return error.into_response(),
    };
    guard::default_propfind_depth(&mut request);
    let root_segments: Vec<String> = match parse_path(&principal.root) {
        Ok(names) => names.iter().map(|n| n.as_str().to_owned()).collect(),
        Err(_) => return ServiceError::internal(anyhow::anyhow!("stored root path unparsable")).into_response(),
    };
    // A `PUT` needs the owner's usage and the group's policy too: read with the walk (at the
    // same time on PostgreSQL; on SQLite both run on this thread), a new file's write then waits
    // for no further query (an overwrite uses them as well, and reads its file's policy only
    // when that is another one).
    let opened = open_filesystem(&state, &principal, &root_segments, &request_path);
    let (filesystem, new_file_facts) = if request.method() == Method::PUT {
        let facts = writes::new_file_facts(&state, principal.user_id, principal.group_id);
        let (filesystem, facts) = tokio::join!(opened, facts);
        (filesystem, facts.ok())
    } else {
        (opened.await, None)
    };
    let filesystem = match filesystem {
        Ok(filesystem) => filesystem,
        Err(response) => return response,
    };
    if let Some(facts) = new_file_facts {
        filesystem.remember_new_file_facts(facts);
    }
    if let Some(destination) = &destination
        && let Err(error) =
            guard::refuse_cycle(request.method(), &request_path, destination, filesystem.is_folder(&request_path)).await
    {
        return error.into_response();
    }
    if request.method().as_str() == "PROPFIND"
        && let Some(depth_one) = propfind::depth_one(request.headers().get("depth"))
    {
        let (parts, body) = request.into_parts();
        let body = match axum::body::to_bytes(body, PROPFIND_BODY_LIMIT).await {
            Ok(body) => body,
            Err(_) => return ServiceError::request_too_large().into_response(),
        };
        if let Some(props) = propfind::requested_props(&body)
            && let Some(response) = propfind::answer(&filesystem, &request_path, depth_one, props).await
        {
            return response;
        }
        request = Request::from_parts(parts, axum::body::Body::from(body));
    }
    if request.method().as_str() == "LOCK" {
        let (parts, body) = request.into_parts();
        let body = match axum::body::to_bytes(body, guard::LOCK_BODY_LIMIT).await {
            Ok(body) => body,
            Err(_) => return ServiceError::request_too_large().into_response(),
        };
        if let Err(error) = guard::check_lock_body(&body) {
            return error.into_response();
        }
        request = Request::from_parts(parts, axum::body::Body::from(body));
    }
    let member_changes = member_changes(request.method(), &filesystem, &request_path, destination.as_ref()).await;
    let lock_principal = principal.account_id.to_string();
    let locks = locks::KvLocks::new(state.shared_store(), principal.user_id, root_segments, &member_changes);
    let lock_refusal = locks.clone();
    let handler = DavHandler::builder()
        .filesystem(Box::new(filesystem))
        .locksystem(Box::new(locks))
        .strip_prefix(PREFIX)
        .principal(lock_principal)
        .read_buf_size(READ_BUFFER)
        .build_handler();
    let method = request.method().clone();
    let response = handler.handle(request).await.map(axum::body::Body::new);
    let mut response = if method.as_str() == "PROPFIND" { response.map(coalesce) } else { response };
    if let Some(refusal) = lock_refusal.refusal()
        && response.status() == StatusCode::LOCKED
    {
        return refusal.error().into_response();
    }
    if matches!(method, Method::GET | Method::HEAD) && response.status().is_success() {
        content_safety::harden_file_response(response.headers_mut());
    }
    finish(&method, response)
}

/// The paths whose folder gains or loses a member if the request succeeds (see
/// `locks::KvLocks`): a new name written or made, a name deleted, a move's both ends, a copy's
/// new destination.
async fn member_changes<'p>(
    method: &Method,
    filesystem: &fs::NuboFs,
    path: &'p DavPath,
    destination: Option<&'p DavPath>,
) -> Vec<&'p DavPath> {
    let new_destination = async {
        match destination {
            Some(destination) if !filesystem.exists(destination).await => Some(destination),
            _ => None,
        }
    };
    match method.as_str() {
        "PUT" if !filesystem.exists(path).await => vec![path],
        "MKCOL" | "DELETE" => vec![path],
        "MOVE" => std::iter::once(path).chain(new_destination.await).collect(),
        "COPY" => new_destination.await.into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The request's filesystem at the account's root folder, its entry cache already holding the
/// objects along the request's path: one statement finds the root and them, where looking up
/// the root and then walking to the path took two.
async fn open_filesystem(
    state: &Context,
    principal: &DavPrincipal,
    root_segments: &[String],
    request_path: &DavPath,
) -> Result<fs::NuboFs, Response> {
    let below = segments(request_path);
    let names: Vec<&str> = root_segments.iter().map(String::as_str).chain(below.iter().copied()).collect();
    let mut walked = files::walk_from_root(state, principal.user_id, &names)
        .await
        .map_err(ErrorResponse::into_response)?
        .into_iter()
        .skip(root_segments.len());
    let walked_root = walked.next().filter(|root| root.is_folder);
    let seeded = walked_root.is_some();
    let root = match walked_root {
        Some(root) => root,
        // No root folder yet (a new user), or the account's root is gone: the plain look-up
        // creates the one and reports the other.
        None => files::folder_entry(state, principal.user_id, &principal.root).await.map_err(|error| {
            if error.kind == ErrorKind::NotFound {
                ServiceError::not_found(codes::WEBDAV_ROOT_MISSING, "the account's root folder no longer exists")
                    .into_response()
            } else {
                error.into_response()
            }
        })?,
    };
    let filesystem = fs::NuboFs::new(state.clone(), principal.clone(), root);
    if seeded {
        filesystem.remember_walk(&below, 0, walked);
    }
    Ok(filesystem)
}

/// dav-server hands a multistatus over one `<response>` at a time; gathering the pieces that are
/// ready into one saves a socket write (and a chunk header) per entry of a large listing.
fn coalesce(body: axum::body::Body) -> axum::body::Body {
    axum::body::Body::from_stream(body.into_data_stream().ready_chunks(MULTISTATUS_PIECES).map(|pieces| {
        let mut joined = bytes::BytesMut::new();
        for piece in pieces {
            joined.extend_from_slice(&piece?);
        }
        Ok::<_, axum::Error>(joined.freeze())
    }))
}

/// Keeps dav-server's XML error bodies; gives its bodiless errors the uniform JSON body.
fn finish(method: &Method, mut response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    if response.headers().contains_key(header::CONTENT_TYPE) {
        // dav-server refuses `Depth: infinity` with 501; RFC 4918 (9.1) answers 403 with the
        // same `propfind-finite-depth` body.
        if method.as_str() == "PROPFIND" && status == StatusCode::NOT_IMPLEMENTED {
            *response.status_mut() = StatusCode::FORBIDDEN;
        }
        mark_rendered(&mut response);
        return response;
    }
    // A PUT's only 405 is dav-server's answer to the write's commit finding the name taken:
    // another request created it meanwhile (two PUTs racing on a new name). RFC 4918 has 405
    // for MKCOL only; a PUT gets 409 as when a folder holds the name.
    let put_race = *method == Method::PUT && status == StatusCode::METHOD_NOT_ALLOWED;
    let status = if put_race { StatusCode::CONFLICT } else { status };
    let (code, message) = match status {
        _ if put_race => (codes::OBJECT_NAME_TAKEN, "another request created this name meanwhile"),
        StatusCode::BAD_REQUEST => (codes::DAV_BAD_REQUEST, "the WebDAV request is malformed"),
        StatusCode::FORBIDDEN => (codes::DAV_FORBIDDEN, "the operation is not allowed here"),
        StatusCode::NOT_FOUND => (codes::OBJECT_NOT_FOUND, "no such file or folder"),
        StatusCode::METHOD_NOT_ALLOWED => (codes::DAV_METHOD_NOT_ALLOWED, "the method does not apply to this resource"),
        StatusCode::CONFLICT => (codes::DAV_CONFLICT, "the parent folder is missing or the operation conflicts"),
        StatusCode::PRECONDITION_FAILED => (codes::DAV_PRECONDITION_FAILED, "a precondition of the request failed"),
        StatusCode::PAYLOAD_TOO_LARGE => (codes::FILE_TOO_LARGE, "the file is larger than the policy allows"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (codes::REQUEST_UNSUPPORTED_MEDIA_TYPE, "unsupported content type"),
        StatusCode::RANGE_NOT_SATISFIABLE => (codes::DAV_RANGE_NOT_SATISFIABLE, "the range is outside the file"),
        StatusCode::LOCKED => (codes::DAV_LOCKED, "the resource is locked"),
        StatusCode::NOT_IMPLEMENTED => (codes::DAV_NOT_IMPLEMENTED, "this WebDAV feature is not supported"),
        // COPY and MOVE copy references, not bytes: their 502 is dav-server's answer to a
        // Destination outside `/dav`.
        StatusCode::BAD_GATEWAY if matches!(method.as_str(), "COPY" | "MOVE") => {
            (codes::DAV_DESTINATION_OUTSIDE, "the destination is not inside this WebDAV endpoint")
        }
        StatusCode::BAD_GATEWAY => (codes::DAV_STORAGE_UNAVAILABLE, "the storage behind this file does not answer"),
        StatusCode::INSUFFICIENT_STORAGE => (codes::STORAGE_QUOTA_EXCEEDED, "not enough storage space left"),
        _ => (codes::SERVER_INTERNAL, "internal server error"),
    };
    let (mut parts, _) = response.into_parts();
    let (rendered, body) = error_response(status, code, message).into_parts();
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.extend(rendered.headers);
    parts.extensions.extend(rendered.extensions);
    Response::from_parts(parts, body)
}
