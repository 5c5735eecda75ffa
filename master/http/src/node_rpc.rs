//! `POST /api/v1/node/rpc`: the router storage nodes call. The signature is checked first
//! (known and enabled node, skew window, constant-time MAC, nonce never seen before, nonces
//! kept in the shared key-value store so masters behind one balancer agree), then the body is
//! parsed as a request for the master; the answer is a protocol `Response` whose HTTP status
//! follows its error code. Refusals are logged with the node and the reason.

use std::time::Duration;

use async_trait::async_trait;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response as HttpResponse};
use nubo_model::kv::KvStore;
use nubo_protocol::key::NodeKey;
use nubo_protocol::nonce::{NonceStore, NonceStoreError};
use nubo_protocol::rpc::{ErrorCode, Request, Response, RpcError};
use nubo_protocol::signing::{RequestParts, SignatureHeaders, Verifier, VerifyError};
use nubo_protocol::{Role, unix_now};

use crate::error::{ErrorBody, current_request_id, status_of};
use nubo_service::content::node_calls::{self, Caller, Refusal, protocol_code};
use nubo_service::context::Context;
use nubo_service::error::{ErrorKind, ServiceError};

/// How far a node's clock may be from the master's.
const MAX_SKEW: Duration = Duration::from_secs(60);

pub async fn handle(
    State(state): State<Context>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> HttpResponse {
    let node = match authenticate(&state, &uri, &headers, &body).await {
        Ok(node) => node,
        Err(error) => {
            let claimed = headers.get(nubo_protocol::signing::NODE_HEADER).and_then(|v| v.to_str().ok());
            tracing::warn!(node = ?claimed, code = %error.code, reason = %error.message, "refused a node's call");
            return answer(Response { id: None, outcome: Err(error) });
        }
    };
    let request = match Request::parse_for(Role::Master, &body) {
        Ok(request) => request,
        Err(rejected) => {
            tracing::warn!(node = %node.name, code = %rejected.error.code, "refused a malformed call");
            return answer(rejected.into_response());
        }
    };
    let method = request.method();
    let outcome = node_calls::dispatch(&state, &node, request.call).await.map_err(|refusal| match refusal {
        Refusal::Protocol(error) => error,
        Refusal::Service(error) => refused(error),
    });
    if let Err(error) = &outcome {
        tracing::info!(node = %node.name, %method, code = %error.code, "node call refused");
    }
    answer(Response { id: Some(request.id), outcome })
}

async fn authenticate(state: &Context, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Caller, RpcError> {
    let signature = SignatureHeaders::parse(|name| headers.get(name).map(|value| value.as_bytes()))?;
    let node = node_calls::caller(state, &signature.node)
        .await
        .map_err(|_| RpcError::unavailable("the master's database is unavailable"))?
        .ok_or(VerifyError::UnknownNode)?;
    let key = NodeKey::new(&node.key).map_err(|_| RpcError::internal())?;
    // The path as the node sent it (a nested router's `Uri` would lack the `/api/v1` prefix).
    let path = uri.path_and_query().map_or(uri.path(), |path| path.as_str());
    let parts = RequestParts { method: "POST", path, body };
    let nonces = KvNonces(state.store());
    Verifier::new(Role::Node).with_max_skew(MAX_SKEW).verify(&key, &signature, &parts, unix_now(), &nonces).await?;
    Ok(node)
}

/// A service refusal as a protocol error. `data` holds the uniform error body and `status` the
/// HTTP status the JSON API would answer with, so a node relays the master's refusal to its
/// client unchanged (507, 413, 403... rather than one status per protocol code). Internal
/// faults are logged here and say nothing more.
fn refused(error: ServiceError) -> RpcError {
    let code = protocol_code(error.kind);
    if code == ErrorCode::Internal {
        // ERROR only for our own faults; a dependency that failed under us is a warning.
        if error.kind == ErrorKind::Internal {
            tracing::error!(error = %error.message, source = ?error.source, "a node's call failed");
        } else {
            tracing::warn!(code = %error.code, error = %error.message, "a node's call could not be served");
        }
        return RpcError::internal();
    }
    tracing::debug!(code = %error.code, "a node's call was refused");
    let status = status_of(error.kind).as_u16();
    let body = ErrorBody {
        code: error.code.to_string(),
        message: error.message.to_string(),
        field: error.field,
        request_id: current_request_id(),
    };
    let data = serde_json::to_value(body).unwrap_or_default();
    RpcError::new(code, error.message.into_owned()).with_data(data).with_status(status)
}

fn answer(response: Response) -> HttpResponse {
    let status = StatusCode::from_u16(response.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut answer = (status, Json(response)).into_response();
    // The envelope is this endpoint's error body: the uniform-errors layer leaves it alone.
    crate::error::mark_rendered(&mut answer);
    answer
}

/// Nonces in the shared key-value store: one atomic set-if-absent per request.
struct KvNonces<'a>(&'a dyn KvStore);

#[async_trait]
impl NonceStore for KvNonces<'_> {
    async fn remember(&self, node: &str, nonce: &str, ttl: Duration) -> Result<bool, NonceStoreError> {
        self.0
            .set_if_absent(&format!("node-nonce:{node}:{nonce}"), "1", ttl)
            .await
            .map_err(|e| NonceStoreError::Unavailable(e.to_string()))
    }
}
