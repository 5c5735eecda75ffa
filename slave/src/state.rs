//! The node's shared state: what every handler of the node (RPC, uploads, downloads, blobs,
//! fetches, reports) reads and changes, and the plain types it holds. It names nothing that
//! names it (`tests/node/layers.rs`): the behaviour over these types stays in `fetch` and
//! `instruments`.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use nubo_common::guard::AddressGuard;
use nubo_common::metrics::{Classifier, HttpMetrics, Registry};
use nubo_common::secret::Secret;
use nubo_common::storage::local::LocalBlobStore;
use nubo_protocol::client::RpcClient;
use nubo_protocol::key::NodeKey;
use nubo_protocol::nonce::MemoryNonceStore;
use nubo_protocol::signing::Verifier;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

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
    pub fetches: Fetches,
    /// Metrics, kept only while a `metrics_token` is configured.
    pub instruments: Option<Instruments>,
}

pub type Shared = Arc<NodeState>;

/// Longest wait for a TCP (and TLS) connection to the remote of a fetch.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The node's running fetches by task id, and the HTTP client they share (`fetch` runs them).
pub struct Fetches {
    pub(crate) guard: AddressGuard,
    /// `Err` holds why the client could not be built; fetches are then refused as unavailable.
    pub(crate) http: Result<reqwest::Client, String>,
    running: std::sync::Mutex<HashMap<String, CancellationToken>>,
}

impl Fetches {
    /// Builds the guarded client from the node's configuration. Touches no network.
    pub fn new(config: &Config) -> Self {
        let guard = AddressGuard { allow_private: config.fetch_allow_private_addresses };
        let http = reqwest::Client::builder()
            .dns_resolver(Arc::new(guard.resolver()))
            .redirect(guard.redirect_policy())
            .connect_timeout(CONNECT_TIMEOUT)
            // A proxy would resolve and connect on the node's behalf, out of the guard's reach.
            .no_proxy()
            .user_agent(concat!("nubo-slave/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| error.to_string());
        Self { guard, http, running: std::sync::Mutex::new(HashMap::new()) }
    }

    /// Whether a fetch with this task id is under way.
    pub fn is_running(&self, task_id: &str) -> bool {
        self.running().contains_key(task_id)
    }

    pub(crate) fn running(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        // The map stays consistent whatever panicked while holding it: no insert is half done.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The new fetch's cancel token, or `None` when one with this id already runs. Stopping the
    /// node cancels it too (the stream ends, nothing is left, nothing is reported).
    pub(crate) fn register(&self, task_id: &str, shutdown: &CancellationToken) -> Option<CancellationToken> {
        let mut running = self.running();
        if running.contains_key(task_id) {
            return None;
        }
        let token = shutdown.child_token();
        running.insert(task_id.to_owned(), token.clone());
        Some(token)
    }
}

/// What a node counts while metrics are on, and the token that guards reading it (`instruments`
/// serves them).
pub struct Instruments {
    pub registry: Arc<Registry>,
    pub http: Arc<HttpMetrics>,
    pub(crate) token: Secret,
}

impl Instruments {
    /// `classify` tells which routes move file bytes (`instruments::classify_transfer`).
    pub fn new(token: Secret, classify: Classifier) -> Self {
        let registry = Arc::new(Registry::new());
        let http = Arc::new(HttpMetrics::new(registry.clone(), classify));
        Self { registry, http, token }
    }
}
