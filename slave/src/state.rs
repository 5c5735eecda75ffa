//! The node's shared state: what every handler of the node (RPC, uploads, downloads, blobs,
//! fetches, reports) reads and changes.

use std::sync::Arc;

use nubo_common::storage::local::LocalBlobStore;
use nubo_protocol::client::RpcClient;
use nubo_protocol::key::NodeKey;
use nubo_protocol::nonce::MemoryNonceStore;
use nubo_protocol::signing::Verifier;
use tokio::sync::Mutex;

use crate::config::Config;
use crate::sessions::SessionStore;

/// Everything a handler needs, shared by all requests.
pub struct NodeState {
    pub node_id: String,
    pub key: NodeKey,
    pub verifier: Verifier,
    pub nonces: MemoryNonceStore,
    pub store: LocalBlobStore,
    pub sessions: SessionStore,
    pub config: Config,
    /// Calls to the master's router; `None` when no `master_url` is configured (the node then
    /// keeps finished uploads and reports them once one is).
    pub master: Option<RpcClient>,
    /// Sessions whose completion report is under way (one report per session at a time).
    pub reporting: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Cancelled when the node stops serving: background reports end with it.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Woken whenever a report settles, for requests waiting on the master's answer.
    pub reported: tokio::sync::Notify,
    /// Serialises the completion step, so two last chunks arriving together complete once.
    pub completing: Mutex<()>,
    /// The chunks (session, index) a request is writing right now: one writer per chunk.
    pub writing: std::sync::Mutex<std::collections::HashSet<(String, u32)>>,
    /// External downloads under way and their guarded HTTP client.
    pub fetches: crate::fetch::Fetches,
    /// Metrics, kept only while a `metrics_token` is configured.
    pub instruments: Option<crate::instruments::Instruments>,
}

pub type Shared = Arc<NodeState>;
