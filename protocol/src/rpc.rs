//! Control-plane envelopes: `Request { id, method, params }` and `Response { id, result | error }`
//! as JSON, their strict parsing into typed values, [`RpcError`] with its stable codes, and the
//! protocol-version check of the `ping` handshake. Signing is `signing`'s; transport is the
//! caller's.
//!
//! Parsing never panics: whatever the bytes, a receiver gets either a typed [`Request`] or a
//! [`Rejected`] that carries the request id when it could be read, ready to answer.

use std::fmt;

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::methods::{Call, Method};
use crate::{PROTOCOL_VERSION, Role};

/// Longest request id accepted; ids are opaque strings chosen by the sender (a UUID fits).
pub const MAX_ID_LEN: usize = 128;

/// Stable machine-readable error codes (snake_case on the wire). Codes this version does not
/// know read as `Unrecognized`, so a newer peer's error still parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The body is not a request envelope (not JSON, no string `id` or `method`).
    InvalidRequest,
    /// The method is not one this receiver serves.
    UnknownMethod,
    /// The params do not fit the method (missing or mistyped field, malformed value).
    InvalidParams,
    /// A peer's answer is not a well-formed response to the request sent (client side).
    InvalidResponse,
    /// The peers speak different protocol versions.
    IncompatibleVersion,
    /// Missing, malformed or wrong signature, or an unknown node.
    Unauthorized,
    /// The signature's timestamp is outside the accepted window (check the clocks).
    Stale,
    /// The signature's nonce was already used.
    Replayed,
    /// The named session, blob or task does not exist.
    NotFound,
    /// The request contradicts the current state (e.g. a session completed twice differently).
    Conflict,
    /// A fault on the receiver's side; details are in its log only.
    Internal,
    /// A dependency of the receiver is down for now (storage, database, key-value store).
    Unavailable,
    #[serde(other)]
    Unrecognized,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::InvalidResponse => "invalid_response",
            ErrorCode::IncompatibleVersion => "incompatible_version",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Stale => "stale",
            ErrorCode::Replayed => "replayed",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Unrecognized => "unrecognized",
        }
    }

    /// The HTTP status an RPC endpoint answers with this error, so proxies and access logs see
    /// failures; the JSON body stays authoritative.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidRequest
            | ErrorCode::UnknownMethod
            | ErrorCode::InvalidParams
            | ErrorCode::IncompatibleVersion => 400,
            ErrorCode::Unauthorized | ErrorCode::Stale | ErrorCode::Replayed => 401,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::Internal | ErrorCode::Unrecognized => 500,
            ErrorCode::InvalidResponse => 502,
            ErrorCode::Unavailable => 503,
        }
    }

    /// Whether sending the same call again later may succeed. A stale or replayed request needs
    /// a fresh signature, not a resend of the same bytes, so those are not retryable as such.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorCode::Unavailable)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error half of a response: a stable code, a message safe to log on the other side, and
/// optional machine-readable detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra detail for the caller. For `upload_complete` refusals it holds the client-facing
    /// error body, which the node relays to the uploading client unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The HTTP status that goes with `data` when the node relays it to a client (507 for a
    /// quota refusal, 413, 403...), so the client sees the master's own answer and not the
    /// coarser protocol `code`. Optional on the wire: a peer that does not send it leaves the
    /// receiver to derive a status from `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None, status: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Names the HTTP status a relay answers its client with along with `data`.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn unknown_method(name: &str) -> Self {
        // Cap the echo: the name comes from an untrusted body and ends up in logs.
        let shown: String = name.chars().take(64).collect();
        Self::new(ErrorCode::UnknownMethod, format!("unknown method `{shown}`"))
    }

    pub fn invalid_params(method: Method, detail: impl fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidParams, format!("invalid params for `{method}`: {detail}"))
    }

    pub fn invalid_response(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidResponse, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// A receiver-side fault: the cause belongs in the receiver's log, not in the answer.
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error")
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
}

/// The peers' protocol versions differ; answered as `incompatible_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("peer speaks protocol version {theirs}, this side speaks {ours}")]
pub struct VersionMismatch {
    pub ours: u32,
    pub theirs: u32,
}

/// The `ping` handshake check, on both sides: `PROTOCOL_VERSION` is bumped only on incompatible
/// changes (compatible ones ride on optional fields and capabilities), so any difference means
/// the peers cannot talk.
pub fn check_protocol_version(theirs: u32) -> Result<(), VersionMismatch> {
    if theirs == PROTOCOL_VERSION { Ok(()) } else { Err(VersionMismatch { ours: PROTOCOL_VERSION, theirs }) }
}

impl From<VersionMismatch> for RpcError {
    fn from(mismatch: VersionMismatch) -> Self {
        Self::new(ErrorCode::IncompatibleVersion, mismatch.to_string())
    }
}

/// A control-plane request: `{"id": "...", "method": "...", "params": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Opaque, echoed in the response; 1 to [`MAX_ID_LEN`] characters.
    pub id: String,
    pub call: Call,
}

/// A request that could not be parsed, with what is needed to answer it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The request's id when it could be read; the response then carries it.
    pub id: Option<String>,
    pub error: RpcError,
}

impl Rejected {
    pub fn into_response(self) -> Response {
        Response { id: self.id, outcome: Err(self.error) }
    }
}

impl Request {
    pub fn new(id: impl Into<String>, call: impl Into<Call>) -> Self {
        Self { id: id.into(), call: call.into() }
    }

    pub fn method(&self) -> Method {
        self.call.method()
    }

    /// Parses a request body received by either side.
    pub fn parse(body: &[u8]) -> Result<Self, Rejected> {
        Self::parse_value(parse_json(body).map_err(|error| Rejected { id: None, error })?, None)
    }

    /// Parses a request body received by `role`: a method the other side serves is refused as
    /// `unknown_method`, before its params are looked at.
    pub fn parse_for(role: Role, body: &[u8]) -> Result<Self, Rejected> {
        Self::parse_value(parse_json(body).map_err(|error| Rejected { id: None, error })?, Some(role))
    }

    fn parse_value(value: Value, role: Option<Role>) -> Result<Self, Rejected> {
        let Value::Object(mut fields) = value else {
            return Err(Rejected { id: None, error: RpcError::invalid_request("a request is a JSON object") });
        };
        let id = match fields.remove("id") {
            Some(Value::String(id)) if valid_id(&id) => id,
            _ => {
                let error = RpcError::invalid_request(format!("`id` must be a string of 1 to {MAX_ID_LEN} characters"));
                return Err(Rejected { id: None, error });
            }
        };
        let reject = |error: RpcError| Rejected { id: Some(id.clone()), error };
        let Some(Value::String(name)) = fields.remove("method") else {
            return Err(reject(RpcError::invalid_request("`method` must be a string")));
        };
        let method = match Method::parse(&name) {
            Some(method) if role.is_none_or(|role| method.handled_by(role)) => method,
            _ => return Err(reject(RpcError::unknown_method(&name))),
        };
        // Absent params read as null, which no params type accepts: the error then names the
        // missing fields rather than the envelope.
        let params = fields.remove("params").unwrap_or(Value::Null);
        match Call::from_parts(method, params) {
            Ok(call) => Ok(Self { id, call }),
            Err(error) => Err(reject(RpcError::invalid_params(method, error))),
        }
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().count() <= MAX_ID_LEN
}

fn parse_json(body: &[u8]) -> Result<Value, RpcError> {
    serde_json::from_slice(body).map_err(|error| RpcError::invalid_request(format!("body is not JSON: {error}")))
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut envelope = serializer.serialize_struct("Request", 3)?;
        envelope.serialize_field("id", &self.id)?;
        envelope.serialize_field("method", self.call.method().as_str())?;
        envelope.serialize_field("params", &self.call.params())?;
        envelope.end()
    }
}

/// Goes through [`Request::parse`]'s rules; prefer `parse` on a server, which keeps the id and
/// the typed error for the answer.
impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::parse_value(value, None).map_err(|rejected| D::Error::custom(rejected.error))
    }
}

/// A control-plane response: `{"id": "...", "result": ...}` or `{"id": "...", "error": {...}}`,
/// never both. `id` is null only when the request's id could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: Option<String>,
    pub outcome: Result<Value, RpcError>,
}

/// A handler's typed outcome as the JSON `result` of a response (an unencodable result, a bug,
/// answers `internal`), so one dispatcher can serve methods with different result types.
pub fn encode_outcome<T: Serialize>(outcome: Result<T, RpcError>) -> Result<Value, RpcError> {
    serde_json::to_value(outcome?).map_err(|_| RpcError::internal())
}

impl Response {
    /// A success for request `id`. A result that cannot be encoded (a bug: results are plain
    /// structs) answers `internal` rather than panicking.
    pub fn success<T: Serialize>(id: impl Into<String>, result: &T) -> Self {
        Self { id: Some(id.into()), outcome: encode_outcome(Ok(result)) }
    }

    pub fn failure(id: impl Into<String>, error: RpcError) -> Self {
        Self { id: Some(id.into()), outcome: Err(error) }
    }

    /// What a handler returned, as the answer to request `id`.
    pub fn from_outcome<T: Serialize>(id: impl Into<String>, outcome: Result<T, RpcError>) -> Self {
        match outcome {
            Ok(result) => Self::success(id, &result),
            Err(error) => Self::failure(id, error),
        }
    }

    /// The HTTP status an RPC endpoint sends this answer with: 200, or its error code's status.
    pub fn http_status(&self) -> u16 {
        self.outcome.as_ref().map_or_else(|error| error.code.http_status(), |_| 200)
    }

    /// Parses a response body; anything but a well-formed response is `invalid_response`.
    pub fn parse(body: &[u8]) -> Result<Self, RpcError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|error| RpcError::invalid_response(format!("response is not JSON: {error}")))?;
        Self::parse_value(value)
    }

    fn parse_value(value: Value) -> Result<Self, RpcError> {
        let Value::Object(mut fields) = value else {
            return Err(RpcError::invalid_response("a response is a JSON object"));
        };
        let id = match fields.remove("id") {
            Some(Value::String(id)) => Some(id),
            Some(Value::Null) => None,
            _ => return Err(RpcError::invalid_response("`id` must be a string or null")),
        };
        // `remove` tells a present `null` (Some) from an absent key (None): a null result is a
        // result, a missing one is a malformed response.
        let outcome = match (fields.remove("result"), fields.remove("error")) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(serde_json::from_value::<RpcError>(error)
                .map_err(|e| RpcError::invalid_response(format!("malformed error: {e}")))?),
            _ => return Err(RpcError::invalid_response("a response has exactly one of `result` and `error`")),
        };
        Ok(Self { id, outcome })
    }

    /// The typed result of the request with id `request_id`: the peer's error as is, or
    /// `invalid_response` when the answer belongs to another request or has the wrong shape.
    pub fn into_result<T: DeserializeOwned>(self, request_id: &str) -> Result<T, RpcError> {
        match (self.id.as_deref(), self.outcome) {
            // A request the peer could not read at all comes back without an id.
            (None, Err(error)) => Err(error),
            (Some(id), outcome) if id == request_id => {
                let result = outcome?;
                serde_json::from_value(result).map_err(|e| RpcError::invalid_response(format!("malformed result: {e}")))
            }
            _ => Err(RpcError::invalid_response("response id does not match the request")),
        }
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut envelope = serializer.serialize_struct("Response", 2)?;
        envelope.serialize_field("id", &self.id)?;
        match &self.outcome {
            Ok(result) => envelope.serialize_field("result", result)?,
            Err(error) => envelope.serialize_field("error", error)?,
        }
        envelope.end()
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse_value(Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::methods::*;

    fn hash() -> Blake3Hex {
        Blake3Hex::parse(&"0f".repeat(32)).unwrap()
    }

    /// One call per method; the match makes a new method fail to compile here until it has one.
    fn sample(method: Method) -> Call {
        let task_id = "task-1".to_owned();
        let storage_key = "2026/01/blob".to_owned();
        match method {
            Method::Ping => PingParams { protocol_version: PROTOCOL_VERSION }.into(),
            Method::UploadSessionCreate => UploadSessionCreateParams {
                session_id: "s1".into(),
                storage_key,
                size: 5000,
                chunk_size: 1024,
                total_chunks: 5,
                expires_at: 1_800_000_000,
            }
            .into(),
            Method::UploadSessionAbort => UploadSessionAbortParams { session_id: "s1".into() }.into(),
            Method::UploadComplete => {
                UploadCompleteParams { session_id: "s1".into(), size: 5000, blake3: hash(), storage_key }.into()
            }
            Method::BlobDelete => BlobDeleteParams { storage_key }.into(),
            Method::BlobStat => BlobStatParams { storage_key }.into(),
            Method::ExternalDownloadCreate => ExternalDownloadCreateParams {
                task_id,
                url: "https://example.com/a.iso".into(),
                storage_key,
                max_size: 1 << 30,
                timeout_secs: Some(600),
            }
            .into(),
            Method::ExternalDownloadCancel => ExternalDownloadCancelParams { task_id }.into(),
            Method::ExternalDownloadProgress => {
                ExternalDownloadProgressParams { task_id, downloaded: 10, total: None }.into()
            }
            Method::ExternalDownloadComplete => ExternalDownloadCompleteParams {
                task_id,
                storage_key,
                size: 10,
                blake3: hash(),
                file_name: Some("a.iso".into()),
                content_type: None,
            }
            .into(),
            Method::ExternalDownloadFailed => ExternalDownloadFailedParams {
                task_id,
                reason: FailureReason::HttpStatus,
                message: "remote answered 404".into(),
                http_status: Some(404),
            }
            .into(),
            Method::ThumbnailRender => ThumbnailRenderParams { storage_key, side: 256 }.into(),
        }
    }

    fn rejected(body: Value) -> Rejected {
        Request::parse(body.to_string().as_bytes()).unwrap_err()
    }

    #[test]
    fn every_method_round_trips_through_the_wire() {
        for &method in Method::ALL {
            let request = Request::new("r-1", sample(method));
            let body = serde_json::to_vec(&request).unwrap();
            let value: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(value["method"], json!(method.as_str()));
            assert!(value["params"].is_object(), "{method}");
            assert_eq!(Request::parse(&body).unwrap(), request);
            assert_eq!(serde_json::from_slice::<Request>(&body).unwrap(), request);
        }
    }

    #[test]
    fn the_wire_shape_is_id_method_params() {
        let request = Request::new("7", BlobDeleteParams { storage_key: "k".into() });
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"id": "7", "method": "blob_delete", "params": {"storage_key": "k"}})
        );
    }

    #[test]
    fn a_body_that_is_not_json_is_an_invalid_request_without_id() {
        let rejected = Request::parse(b"{not json").unwrap_err();
        assert_eq!(rejected.id, None);
        assert_eq!(rejected.error.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn a_request_needs_an_object_with_a_string_id() {
        for body in [json!([1, 2]), json!("ping"), json!({"method": "ping"}), json!({"id": 5, "method": "ping"})] {
            let rejected = rejected(body);
            assert_eq!((rejected.id, rejected.error.code), (None, ErrorCode::InvalidRequest));
        }
        let too_long = rejected(json!({"id": "x".repeat(MAX_ID_LEN + 1), "method": "ping"}));
        assert_eq!(too_long.error.code, ErrorCode::InvalidRequest);
        let empty = rejected(json!({"id": "", "method": "ping"}));
        assert_eq!(empty.error.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn a_missing_method_is_an_invalid_request_that_keeps_the_id() {
        for body in [json!({"id": "a"}), json!({"id": "a", "method": 3})] {
            let rejected = rejected(body);
            assert_eq!(rejected.id.as_deref(), Some("a"));
            assert_eq!(rejected.error.code, ErrorCode::InvalidRequest);
        }
    }

    #[test]
    fn an_unknown_method_is_unknown_method_with_the_id() {
        let rejected = rejected(json!({"id": "a", "method": "format_disk", "params": {}}));
        assert_eq!(rejected.id.as_deref(), Some("a"));
        assert_eq!(rejected.error.code, ErrorCode::UnknownMethod);
        assert!(rejected.error.message.contains("format_disk"));
        let response = serde_json::to_value(rejected.into_response()).unwrap();
        assert_eq!(response["id"], json!("a"));
        assert_eq!(response["error"]["code"], json!("unknown_method"));
        assert!(response.get("result").is_none());
    }

    #[test]
    fn malformed_params_are_invalid_params() {
        for params in
            [json!({"protocol_version": "one"}), json!({}), json!(null), json!("ping"), json!({"protocol_version": -1})]
        {
            let rejected = rejected(json!({"id": "a", "method": "ping", "params": params}));
            assert_eq!(rejected.error.code, ErrorCode::InvalidParams, "{params}");
            assert_eq!(rejected.id.as_deref(), Some("a"));
        }
        let no_params = rejected(json!({"id": "a", "method": "blob_stat"}));
        assert_eq!(no_params.error.code, ErrorCode::InvalidParams);
        assert!(no_params.error.message.contains("blob_stat"));
    }

    #[test]
    fn a_malformed_hash_is_invalid_params() {
        let mut params = serde_json::to_value(sample(Method::UploadComplete).params()).unwrap();
        params["blake3"] = json!("ABC");
        let rejected = rejected(json!({"id": "a", "method": "upload_complete", "params": params}));
        assert_eq!(rejected.error.code, ErrorCode::InvalidParams);
    }

    #[test]
    fn unknown_fields_are_ignored_for_compatibility() {
        let body = json!({"id": "a", "method": "ping", "params": {"protocol_version": 1, "later": true}, "x": 1});
        let request = Request::parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(request.call, Call::Ping(PingParams { protocol_version: 1 }));
    }

    #[test]
    fn a_receiver_refuses_the_other_sides_methods_as_unknown() {
        let body = serde_json::to_vec(&Request::new("a", sample(Method::UploadComplete))).unwrap();
        let rejected = Request::parse_for(Role::Node, &body).unwrap_err();
        assert_eq!(rejected.error.code, ErrorCode::UnknownMethod);
        assert!(Request::parse_for(Role::Master, &body).is_ok());
        let ping = serde_json::to_vec(&Request::new("b", sample(Method::Ping))).unwrap();
        assert!(Request::parse_for(Role::Node, &ping).is_ok());
        assert!(Request::parse_for(Role::Master, &ping).is_ok());
    }

    #[test]
    fn success_and_failure_responses_have_exactly_one_branch() {
        let ok = Response::success("1", &BlobDeleteResult { existed: true });
        assert_eq!(serde_json::to_value(&ok).unwrap(), json!({"id": "1", "result": {"existed": true}}));
        let err = Response::failure("2", RpcError::not_found("no such blob"));
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"id": "2", "error": {"code": "not_found", "message": "no such blob"}})
        );
        let typed: Response = Response::from_outcome::<Ack>("3", Err(RpcError::internal()));
        assert_eq!(typed.outcome.unwrap_err().code, ErrorCode::Internal);
    }

    #[test]
    fn responses_round_trip_and_convert_to_typed_results() {
        let ok = Response::success("1", &BlobStatResult { size: 3, modified_at: Some(9) });
        let parsed = Response::parse(&serde_json::to_vec(&ok).unwrap()).unwrap();
        assert_eq!(parsed, ok);
        let result: BlobStatResult = parsed.into_result("1").unwrap();
        assert_eq!(result, BlobStatResult { size: 3, modified_at: Some(9) });

        let err = Response::failure("2", RpcError::conflict("twice").with_data(json!({"code": "x"})));
        let parsed = Response::parse(&serde_json::to_vec(&err).unwrap()).unwrap();
        assert_eq!(parsed, err);
        let error = parsed.into_result::<Ack>("2").unwrap_err();
        assert_eq!((error.code, error.data), (ErrorCode::Conflict, Some(json!({"code": "x"}))));
    }

    #[test]
    fn a_relayed_status_round_trips_and_an_error_without_one_still_parses() {
        let err = Response::failure("4", RpcError::conflict("full").with_data(json!({"code": "x"})).with_status(507));
        let parsed = Response::parse(&serde_json::to_vec(&err).unwrap()).unwrap();
        assert_eq!(parsed.into_result::<Ack>("4").unwrap_err().status, Some(507));
        // What a master without the field sends: no status, and none is written back either.
        let old = br#"{"id":"5","error":{"code":"conflict","message":"full","data":{"code":"x"}}}"#;
        let error = Response::parse(old).unwrap().into_result::<Ack>("5").unwrap_err();
        assert_eq!((error.code, error.status), (ErrorCode::Conflict, None));
        assert!(!serde_json::to_string(&error).unwrap().contains("status"));
    }

    #[test]
    fn a_response_for_another_request_or_of_the_wrong_shape_is_invalid() {
        let ok = Response::success("1", &Ack {});
        assert_eq!(ok.clone().into_result::<Ack>("2").unwrap_err().code, ErrorCode::InvalidResponse);
        assert_eq!(ok.into_result::<BlobStatResult>("1").unwrap_err().code, ErrorCode::InvalidResponse);
        // An error about an unreadable request has no id and still reaches the caller as is.
        let unreadable = Rejected { id: None, error: RpcError::invalid_request("x") }.into_response();
        assert_eq!(unreadable.into_result::<Ack>("1").unwrap_err().code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn malformed_response_bodies_are_invalid_response() {
        for body in [
            json!({"id": "1"}),
            json!({"id": "1", "result": {}, "error": {"code": "internal", "message": "m"}}),
            json!({"id": 1, "result": {}}),
            json!({"id": "1", "error": {"message": "no code"}}),
            json!([]),
        ] {
            let error = Response::parse(body.to_string().as_bytes()).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidResponse, "{body}");
        }
        assert_eq!(Response::parse(b"<html>").unwrap_err().code, ErrorCode::InvalidResponse);
        // A present null result is a result, not a missing branch.
        let null = Response::parse(br#"{"id": "1", "result": null}"#).unwrap();
        assert_eq!(null.outcome, Ok(Value::Null));
    }

    #[test]
    fn error_codes_are_stable_strings() {
        let table = [
            (ErrorCode::InvalidRequest, "invalid_request", 400),
            (ErrorCode::UnknownMethod, "unknown_method", 400),
            (ErrorCode::InvalidParams, "invalid_params", 400),
            (ErrorCode::InvalidResponse, "invalid_response", 502),
            (ErrorCode::IncompatibleVersion, "incompatible_version", 400),
            (ErrorCode::Unauthorized, "unauthorized", 401),
            (ErrorCode::Stale, "stale", 401),
            (ErrorCode::Replayed, "replayed", 401),
            (ErrorCode::NotFound, "not_found", 404),
            (ErrorCode::Conflict, "conflict", 409),
            (ErrorCode::Internal, "internal", 500),
            (ErrorCode::Unavailable, "unavailable", 503),
        ];
        for (code, name, status) in table {
            assert_eq!(code.as_str(), name);
            assert_eq!(serde_json::to_value(code).unwrap(), json!(name));
            assert_eq!(serde_json::from_value::<ErrorCode>(json!(name)).unwrap(), code);
            assert_eq!(code.http_status(), status);
            assert_eq!(code.is_retryable(), code == ErrorCode::Unavailable);
        }
        assert_eq!(serde_json::from_value::<ErrorCode>(json!("quota_gone")).unwrap(), ErrorCode::Unrecognized);
    }

    #[test]
    fn the_version_check_accepts_only_the_same_version() {
        assert_eq!(check_protocol_version(PROTOCOL_VERSION), Ok(()));
        let mismatch = check_protocol_version(PROTOCOL_VERSION + 1).unwrap_err();
        assert_eq!(mismatch, VersionMismatch { ours: PROTOCOL_VERSION, theirs: PROTOCOL_VERSION + 1 });
        assert_eq!(RpcError::from(mismatch).code, ErrorCode::IncompatibleVersion);
    }

    #[test]
    fn unknown_method_echo_is_capped() {
        let error = RpcError::unknown_method(&"m".repeat(10_000));
        assert!(error.message.len() < 100);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,20}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::hash_map(".{0,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_name_outside_the_table_is_unknown_method(name in "[a-z_]{0,30}|.{0,30}") {
            prop_assume!(Method::parse(&name).is_none());
            let rejected = rejected(json!({"id": "a", "method": name, "params": {}}));
            prop_assert_eq!(rejected.error.code, ErrorCode::UnknownMethod);
            prop_assert_eq!(rejected.id.as_deref(), Some("a"));
        }

        #[test]
        fn non_object_params_are_invalid_params_for_every_method(
            index in 0..Method::ALL.len(),
            params in prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                ".{0,20}".prop_map(Value::String),
            ],
        ) {
            let method = Method::ALL[index];
            let rejected = rejected(json!({"id": "a", "method": method.as_str(), "params": params}));
            prop_assert_eq!(rejected.error.code, ErrorCode::InvalidParams);
        }

        #[test]
        fn objects_with_random_fields_never_pass_as_params_unless_they_fit(
            index in 0..Method::ALL.len(),
            params in arb_json(),
        ) {
            let method = Method::ALL[index];
            let body = json!({"id": "a", "method": method.as_str(), "params": params});
            match Request::parse(body.to_string().as_bytes()) {
                Ok(request) => prop_assert_eq!(request.method(), method),
                Err(rejected) => prop_assert_eq!(rejected.error.code, ErrorCode::InvalidParams),
            }
        }

        #[test]
        fn garbage_bodies_are_rejected_never_panic(body in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = Request::parse(&body);
            let _ = Request::parse_for(Role::Node, &body);
            let _ = Response::parse(&body);
        }

        #[test]
        fn garbage_json_is_rejected_or_parsed_never_panics(value in arb_json()) {
            let body = value.to_string();
            let _ = Request::parse(body.as_bytes());
            let _ = Response::parse(body.as_bytes());
        }
    }
}
