//! Request extractors whose rejections speak the uniform error body instead of axum's plain text.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::{ErrorKind, ServiceError};
use crate::error_codes as codes;

/// A JSON object body. Malformed JSON answers 400, a wrong content type 415, a body over the
/// route's limit 413, and well-formed JSON with wrong, missing or unknown fields 422, and so does
/// JSON that is not an object (serde would read a struct from an array, field by position).
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ServiceError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Json(value) = Json::<serde_json::Value>::from_request(request, state).await.map_err(json_rejection)?;
        if !value.is_object() {
            return Err(ServiceError::new(
                ErrorKind::Validation,
                codes::REQUEST_INVALID_BODY,
                "expected a JSON object",
            ));
        }
        // Through `Json::from_bytes` again so the messages name the failing field's path, as
        // axum words them; bodies are small (the JSON body limit), parsing twice is cheap.
        let bytes = serde_json::to_vec(&value).map_err(ServiceError::internal)?;
        Json::<T>::from_bytes(&bytes).map(|Json(value)| Self(value)).map_err(json_rejection)
    }
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
    type Rejection = ServiceError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ServiceError {
    ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_INVALID_QUERY, rejection.body_text())
}

/// Path parameters; unreadable ones (e.g. a malformed UUID) answer 400 with the uniform body.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ServiceError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(rejection) => {
                Err(ServiceError::new(ErrorKind::BadRequest, codes::REQUEST_INVALID_PATH, rejection.body_text()))
            }
        }
    }
}

/// The address of the connected client (the peer of the TCP connection).
pub struct ClientAddress(pub std::net::IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = ServiceError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| Self(info.0.ip()))
            .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("server started without connection info")))
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
