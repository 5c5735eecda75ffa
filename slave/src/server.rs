//! The node's router and the serve loop with graceful shutdown. Handlers live
//! in `rpc`, `upload` and `download`; this module only wires them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, header};
use axum::routing::{get, post, put};
use axum::{Router, middleware};
use nubo_common::storage::local::LocalBlobStore;
use nubo_protocol::Role;
use nubo_protocol::client::{MASTER_RPC_PATH, RpcClient};
use nubo_protocol::nonce::MemoryNonceStore;
use nubo_protocol::signing::Verifier;
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{Any, CorsLayer};

use crate::config::{Config, ConfigError};
use crate::instruments;
use crate::sessions::SessionStore;
use crate::state::{Fetches, Instruments, NodeState, Shared};
use crate::{blob, download, error, report, rpc, upload};

/// Longest one call to the master may take.
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);

/// A node ready to serve: configuration checked, key loaded.
#[derive(Clone)]
pub struct Node {
    state: Shared,
}

impl Node {
    /// Checks the configuration (key, node id) without touching the network or the disk.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        let key = config.node_key()?;
        let node_id = config.node_id()?.to_owned();
        let verifier = Verifier::new(Role::Master).with_max_skew(Duration::from_secs(config.max_skew_seconds));
        let master = match config.master_url.as_deref().filter(|url| !url.is_empty()) {
            Some(url) => Some(
                RpcClient::new(url, MASTER_RPC_PATH, key.clone(), &node_id, Role::Node, REPORT_TIMEOUT)
                    .map_err(|_| ConfigError::InvalidNodeId(node_id.clone()))?,
            ),
            None => None,
        };
        let fetches = Fetches::new(&config);
        let instruments =
            config.metrics_token().map(|token| Instruments::new(token.clone(), instruments::classify_transfer));
        let state = NodeState {
            node_id,
            key,
            verifier,
            nonces: MemoryNonceStore::new(),
            store: LocalBlobStore::new(config.blobs_dir()),
            sessions: SessionStore::new(config.sessions_dir()),
            config,
            master,
            reporting: std::sync::Mutex::default(),
            reported: tokio::sync::Notify::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            completing: Mutex::new(()),
            writing: Default::default(),
            fetches,
            instruments,
        };
        Ok(Self { state: Arc::new(state) })
    }

    pub fn router(&self) -> Router {
        let body_timeout = nubo_common::serve::seconds(self.state.config.body_timeout_seconds);
        let mut router = Router::new()
            .route("/api/v1/slave/rpc", post(rpc::handle))
            .merge(Self::browser_uploads())
            .merge(Self::browser_downloads())
            .route("/api/v1/slave/blob/{credential}", put(blob::write))
            .route("/api/v1/slave/health", get(instruments::health))
            .route("/metrics", get(instruments::scrape))
            .fallback(error::no_route);
        if let Some(instruments) = &self.state.instruments {
            // A router layer, so the matched route template is known to it.
            router = router
                .layer(middleware::from_fn_with_state(instruments.http.clone(), nubo_common::metrics::track_requests));
        }
        router
            .layer(middleware::from_fn(error::uniform_errors))
            .layer(middleware::from_fn_with_state(body_timeout, error::body_progress))
            .layer(CatchPanicLayer::custom(error::panic_response))
            .with_state(self.state.clone())
    }

    /// The routes a browser calls from the web app's page (another origin): chunk uploads and
    /// their status. Any origin may call them: they take the session's bearer credential, never
    /// cookies, so a foreign page gains nothing it did not already hold.
    fn browser_uploads() -> Router<Shared> {
        let cors = CorsLayer::new()
            .allow_origin(Any)
            .allow_methods([Method::GET, Method::PUT])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
            .max_age(Duration::from_secs(3600));
        Router::new()
            .route("/api/v1/slave/upload/{session_id}", get(upload::status))
            .route("/api/v1/slave/upload/{session_id}/{index}", put(upload::put_chunk))
            .layer(cors)
    }

    /// Signed downloads, which the web app's viewers also fetch from its page (a PDF or a text
    /// file shown in place). The URL is the credential, so any origin may read it.
    fn browser_downloads() -> Router<Shared> {
        let cors = CorsLayer::new()
            .allow_origin(Any)
            .allow_methods([Method::GET, Method::HEAD])
            .allow_headers([header::RANGE])
            .expose_headers([header::CONTENT_LENGTH, header::CONTENT_RANGE, header::ETAG])
            .max_age(Duration::from_secs(3600));
        // axum's `get` also answers HEAD (without a body).
        Router::new().route("/api/v1/slave/download/{credential}", get(download::download)).layer(cors)
    }

    /// Serves on `listener` until `shutdown` resolves, then lets in-flight requests finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(%addr, node_id = %self.state.node_id, "storage node listening");
        }
        let sweeper = tokio::spawn(report::run_sweeper(self.state.clone()));
        let config = &self.state.config;
        let limits = nubo_common::serve::EdgeLimits {
            header_read_timeout: nubo_common::serve::seconds(config.header_read_timeout_seconds),
            idle_timeout: nubo_common::serve::seconds(config.idle_timeout_seconds),
            max_connections: config.max_connections,
            // No per-address cap on nodes yet (issue 51 M2 covers the master's edge).
            max_connections_per_address: 0,
            uncapped_peers: nubo_common::serve::PeerFilter::default(),
        };
        let served = nubo_common::serve::serve(listener, self.router(), limits, shutdown).await;
        self.state.shutdown.cancel();
        let _ = sweeper.await;
        served
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
