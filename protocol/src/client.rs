//! The signed control-plane caller: one `POST` of a typed request to the other side's RPC
//! endpoint, signed as `Role` with the node's key, its answer checked against the request. The
//! master holds one per node; a node holds one for the master.

use std::time::Duration;

use crate::Role;
use crate::key::NodeKey;
use crate::methods::RpcCall;
use crate::rpc::{Request, Response, RpcError};
use crate::signing::{RequestParts, SignError, Signer};

/// Path of the master's router below its base URL.
pub const MASTER_RPC_PATH: &str = "/api/v1/node/rpc";
/// Path of a node's control endpoint below its base URL.
pub const NODE_RPC_PATH: &str = "/api/v1/slave/rpc";

/// Why a call did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// Nothing usable came back: connection refused, timeout, a body that broke off.
    #[error("the peer does not answer: {0}")]
    Unreachable(String),
    /// The peer answered with a protocol error (or an answer that is not one).
    #[error("the peer refused: {0}")]
    Refused(#[from] RpcError),
}

impl CallError {
    /// Whether sending the call again later may succeed: the peer was unreachable, or it said
    /// it is temporarily unable (a resend is signed afresh, so a stale clock is worth a retry
    /// too once the clocks agree again).
    pub fn is_retryable(&self) -> bool {
        match self {
            CallError::Unreachable(_) => true,
            CallError::Refused(error) => {
                error.code.is_retryable()
                    || matches!(error.code, crate::rpc::ErrorCode::Internal | crate::rpc::ErrorCode::Stale)
            }
        }
    }
}

/// Calls one peer's RPC endpoint.
#[derive(Debug, Clone)]
pub struct RpcClient {
    http: reqwest::Client,
    url: String,
    path: &'static str,
    signer: Signer,
}

impl RpcClient {
    /// A caller of `base_url` + `path`, signing as `from` with the key of node `node_id`.
    /// `timeout` bounds each whole call.
    pub fn new(
        base_url: &str,
        path: &'static str,
        key: NodeKey,
        node_id: &str,
        from: Role,
        timeout: Duration,
    ) -> Result<Self, SignError> {
        let signer = Signer::new(key, node_id, from)?;
        // Control calls never follow redirects: a redirect would send a signed body elsewhere.
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Ok(Self { http, url: format!("{}{path}", base_url.trim_end_matches('/')), path, signer })
    }

    /// Sends `params` as a fresh request (new id, new nonce) and answers its typed result.
    pub async fn call<P: RpcCall>(&self, params: P) -> Result<P::Result, CallError> {
        let request_id = uuid::Uuid::new_v4().simple().to_string();
        let body = serde_json::to_vec(&Request::new(request_id.clone(), params))
            .map_err(|e| CallError::Refused(RpcError::invalid_request(format!("cannot encode the request: {e}"))))?;
        let headers = self
            .signer
            .sign(&RequestParts { method: "POST", path: self.path, body: &body }, crate::unix_now())
            .map_err(|e| CallError::Refused(RpcError::invalid_request(e.to_string())))?;
        let mut request = self.http.post(&self.url).header("content-type", "application/json").body(body);
        for (name, value) in headers.pairs() {
            request = request.header(name, value);
        }
        let answer = request.send().await.map_err(|e| CallError::Unreachable(e.to_string()))?;
        let status = answer.status();
        let bytes = answer.bytes().await.map_err(|e| CallError::Unreachable(e.to_string()))?;
        let response = Response::parse(&bytes).map_err(|e| {
            // A proxy's 502/503 page is not a protocol answer, but it is an outage, not a refusal.
            if status.is_server_error() {
                CallError::Unreachable(format!("HTTP {status} without a protocol answer"))
            } else {
                CallError::Refused(e)
            }
        })?;
        Ok(response.into_result::<P::Result>(&request_id)?)
    }

    /// Calls until the peer answers, waiting between attempts from `first_wait` doubling up to
    /// `max_wait`; gives up only on an answer that a resend cannot change (a refusal).
    pub async fn call_until_answered<P: RpcCall + Clone>(
        &self,
        params: P,
        first_wait: Duration,
        max_wait: Duration,
    ) -> Result<P::Result, RpcError> {
        let mut wait = first_wait;
        loop {
            match self.call(params.clone()).await {
                Ok(result) => return Ok(result),
                Err(CallError::Refused(error)) if !CallError::Refused(error.clone()).is_retryable() => {
                    return Err(error);
                }
                Err(error) => {
                    tracing::warn!(method = %P::METHOD, %error, retry_in = ?wait, "call not answered; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(max_wait);
                }
            }
        }
    }
}
