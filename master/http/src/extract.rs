//! Request extractors whose rejections speak the uniform error body instead of axum's plain text,
//! and the one place where text the databases cannot hold is refused: a NUL character in a JSON
//! string, a query parameter or a path parameter (PostgreSQL's TEXT cannot store one, and no
//! name, code or filter of Nubo's needs one).

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use nubo_model::config::TrustedProxies;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use nubo_service::error::{ErrorKind, ServiceError};
use nubo_service::error_codes as codes;

/// A JSON object body. Malformed JSON answers 400, a wrong content type 415, a body over the
/// route's limit 413, and well-formed JSON with wrong, missing or unknown fields 422, and so does
/// JSON that is not an object (serde would read a struct from an array, field by position).
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<serde_json::Value>::from_request(request, state).await.map_err(json_rejection)?;
        if !value.is_object() {
            return Err(ServiceError::new(
                ErrorKind::Validation,
                codes::REQUEST_INVALID_BODY,
                "expected a JSON object",
            )
            .into());
        }
        refuse_nul_in_json(&value, &mut String::new())?;
        // Through `Json::from_bytes` again so the messages name the failing field's path, as
        // axum words them; bodies are small (the JSON body limit), parsing twice is cheap.
        let bytes = serde_json::to_vec(&value).map_err(ServiceError::internal)?;
        Ok(Json::<T>::from_bytes(&bytes).map(|Json(value)| Self(value)).map_err(json_rejection)?)
    }
}

/// The message of every refusal of a NUL character.
const NUL_MESSAGE: &str = "text may not contain NUL characters";

/// Refuses (422 `request.invalid_field`, `field` naming where) a NUL in any string or key of
/// `value`; `at` is the path walked so far (`items[0].name`).
fn refuse_nul_in_json(value: &serde_json::Value, at: &mut String) -> Result<(), ServiceError> {
    use serde_json::Value;
    let refused = |at: &str| Err(ServiceError::validation(if at.is_empty() { "body" } else { at }, NUL_MESSAGE));
    match value {
        Value::String(text) if text.contains('\0') => refused(at),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(index, item)| {
            let len = at.len();
            at.push_str(&format!("[{index}]"));
            refuse_nul_in_json(item, at)?;
            at.truncate(len);
            Ok(())
        }),
        Value::Object(members) => members.iter().try_for_each(|(key, member)| {
            let len = at.len();
            if !at.is_empty() {
                at.push('.');
            }
            at.push_str(key);
            if key.contains('\0') {
                return refused(at);
            }
            refuse_nul_in_json(member, at)?;
            at.truncate(len);
            Ok(())
        }),
        _ => Ok(()),
    }
}

/// The name of the first query parameter whose name or value decodes to text with a NUL (only
/// `%00` does: a URI cannot carry the raw byte).
fn query_parameter_with_nul(query: &str) -> Option<String> {
    query.split('&').find(|pair| pair.contains("%00")).map(|pair| {
        let name = pair.split('=').next().unwrap_or_default();
        percent_encoding::percent_decode_str(name).decode_utf8_lossy().into_owned()
    })
}

fn json_rejection(rejection: JsonRejection) -> ServiceError {
    match rejection {
        JsonRejection::JsonDataError(e) => {
            ServiceError::new(ErrorKind::Validation, codes::REQUEST_INVALID_BODY, e.body_text())
        }
        JsonRejection::JsonSyntaxError(e) => {
            ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_MALFORMED_JSON, e.body_text())
        }
        JsonRejection::MissingJsonContentType(_) => ServiceError::new(
            ErrorKind::UnsupportedMediaType,
            codes::REQUEST_UNSUPPORTED_MEDIA_TYPE,
            "expected a body with Content-Type: application/json",
        ),
        JsonRejection::BytesRejection(e) if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
            ServiceError::request_too_large()
        }
        other => ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_UNREADABLE_BODY, other.body_text()),
    }
}

/// Query parameters; unreadable ones answer 400 with the uniform body.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if let Some(name) = parts.uri.query().and_then(query_parameter_with_nul) {
            return Err(ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_INVALID_QUERY, NUL_MESSAGE)
                .with_field(&name)
                .into());
        }
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(query_rejection(rejection).into()),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ServiceError {
    ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_INVALID_QUERY, rejection.body_text())
}

/// Path parameters; unreadable ones (e.g. a malformed UUID, text that is not UTF-8 or holds a
/// NUL) answer 400 with the uniform body.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let value = match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => value,
            Err(rejection) => {
                return Err(ServiceError::new(
                    ErrorKind::BadRequest,
                    codes::REQUEST_INVALID_PATH,
                    rejection.body_text(),
                )
                .into());
            }
        };
        let params = axum::extract::RawPathParams::from_request_parts(parts, state).await;
        if let Some((name, _)) = params.iter().flat_map(|params| params.iter()).find(|(_, value)| value.contains('\0'))
        {
            return Err(ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_INVALID_PATH, NUL_MESSAGE)
                .with_field(name)
                .into());
        }
        Ok(Self(value))
    }
}

/// The address of the client: the TCP peer, or, when the peer is one of the configured
/// `trusted_proxies` (found on the request as an `Arc<TrustedProxies>` extension), the address
/// it forwarded in `X-Forwarded-For` (see [`client_address`]). Rate limits key on it.
pub struct ClientAddress(pub std::net::IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip())
            .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("server started without connection info")))?;
        let proxies = parts.extensions.get::<std::sync::Arc<TrustedProxies>>().map(|proxies| proxies.as_ref());
        Ok(Self(proxies.map_or(peer, |proxies| client_address(peer, &parts.headers, proxies))))
    }
}

/// The client behind `peer`: the peer itself unless it is a trusted proxy; then the right-most
/// `X-Forwarded-For` address that is not itself a trusted proxy (each proxy appends the address
/// it saw, so addresses further left were written by the client and may be made up). An
/// unreadable entry ends the walk at the last address a trusted proxy vouched for.
pub fn client_address(
    peer: std::net::IpAddr,
    headers: &axum::http::HeaderMap,
    proxies: &TrustedProxies,
) -> std::net::IpAddr {
    let mut client = peer.to_canonical();
    if !proxies.contains(client) {
        return client;
    }
    let forwarded: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|value| value.to_str().unwrap_or("-").split(','))
        .map(str::trim)
        .collect();
    for entry in forwarded.into_iter().rev() {
        let Ok(address) = entry.parse::<std::net::IpAddr>() else { break };
        client = address.to_canonical();
        if !proxies.contains(client) {
            break;
        }
    }
    client
}

/// Middleware: handles the request inside [`nubo_service::audit::activity::with_address`], so the
/// actions it records carry the client's address as [`ClientAddress`] reads it.
pub async fn with_client_address(
    axum::extract::State(proxies): axum::extract::State<std::sync::Arc<TrustedProxies>>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let peer = request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0.ip());
    match peer {
        Some(peer) => {
            let address = client_address(peer, request.headers(), &proxies);
            nubo_service::audit::activity::with_address(address, next.run(request)).await
        }
        None => next.run(request).await,
    }
}

/// A request body as a stream of bytes, never collected in memory.
pub fn body_stream(body: axum::body::Body) -> nubo_common::storage::ByteStream {
    use futures_util::TryStreamExt;
    Box::pin(body.into_data_stream().map_err(std::io::Error::other))
}

/// The declared `Content-Length`, if any.
pub fn content_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers.get(axum::http::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(peer: &str, forwarded: &[&str], proxies: &str) -> String {
        let proxies: TrustedProxies = serde_json::from_value(serde_json::Value::String(proxies.to_owned())).unwrap();
        let mut headers = axum::http::HeaderMap::new();
        for value in forwarded {
            headers.append("x-forwarded-for", value.parse().unwrap());
        }
        client_address(peer.parse().unwrap(), &headers, &proxies).to_string()
    }

    #[test]
    fn a_nul_anywhere_in_a_json_body_is_named_by_its_path() {
        let refused =
            |value: serde_json::Value| refuse_nul_in_json(&value, &mut String::new()).err().and_then(|e| e.field);
        assert_eq!(refused(serde_json::json!({"name": "ok", "tags": ["a", "b\0"]})), Some("tags[1]".to_owned()));
        assert_eq!(refused(serde_json::json!({"a": {"b\0": 1}})), Some("a.b\0".to_owned()));
        assert_eq!(refused(serde_json::json!("\0")), Some("body".to_owned()));
        assert_eq!(refused(serde_json::json!({"name": "a\u{FFFD}b", "n": 1, "list": [{"x": null}]})), None);
    }

    #[test]
    fn only_percent_zero_zero_decodes_to_a_nul_in_a_query() {
        assert_eq!(query_parameter_with_nul("q=a%00b&page=1"), Some("q".to_owned()));
        assert_eq!(query_parameter_with_nul("page=1&%6E%61me=x%00"), Some("name".to_owned()));
        assert_eq!(query_parameter_with_nul("q=a%2500b&r=%0A"), None, "an encoded percent sign is text");
    }

    #[test]
    fn forwarded_addresses_count_only_from_trusted_proxies() {
        assert_eq!(resolve("203.0.113.9", &["198.51.100.1"], ""), "203.0.113.9", "nothing trusted");
        assert_eq!(resolve("203.0.113.9", &["198.51.100.1"], "10.0.0.0/8"), "203.0.113.9", "peer not trusted");
        assert_eq!(resolve("10.0.0.2", &["198.51.100.1"], "10.0.0.0/8"), "198.51.100.1");
        assert_eq!(resolve("::ffff:10.0.0.2", &["198.51.100.1"], "10.0.0.0/8"), "198.51.100.1", "mapped peer");
    }

    #[test]
    fn the_right_most_untrusted_address_wins() {
        // The client made up 1.1.1.1; the outer proxy 10.0.0.3 saw 198.51.100.1.
        let chain = ["1.1.1.1, 198.51.100.1", "10.0.0.3"];
        assert_eq!(resolve("10.0.0.2", &chain, "10.0.0.0/8"), "198.51.100.1");
        assert_eq!(resolve("10.0.0.2", &["10.0.0.4, 10.0.0.3"], "10.0.0.0/8"), "10.0.0.4", "all trusted: left-most");
        assert_eq!(resolve("10.0.0.2", &["garbage, 10.0.0.3"], "10.0.0.0/8"), "10.0.0.3", "stops at garbage");
        assert_eq!(resolve("10.0.0.2", &[], "10.0.0.0/8"), "10.0.0.2", "no header: the peer");
    }
}
