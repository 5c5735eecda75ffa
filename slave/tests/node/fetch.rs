//! External downloads: a node with a fake master fetches from a local web server, streams into
//! a blob and reports back; the SSRF guard, size limit and cancels leave nothing behind.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response as HttpResponse;
use axum::routing::{get, post};
use nubo_common::secret::Secret;
use nubo_protocol::methods::{
    Ack, Call, ExternalDownloadCancelParams, ExternalDownloadCompleteResult, ExternalDownloadCreateParams,
    ExternalDownloadProgressResult, FailureReason,
};
use nubo_protocol::rpc::{Request, Response};
use nubo_protocol::unix_now;
use nubo_slave::config::Config;
use nubo_slave::server::Node;
use serde_json::Value;
use tempfile::TempDir;

use crate::helpers::{KEY, NODE, RPC_PATH, content, error_code, key, sign};

/// Size of `/file.bin`: several read buffers, so the body arrives in many pieces.
const FILE_SIZE: usize = 3 * 1024 * 1024 + 17;
/// `/slow` sends this many pieces of `SLOW_PIECE` bytes, one every `SLOW_PAUSE` (about 10 s).
const SLOW_PIECES: usize = 100;
const SLOW_PIECE: usize = 16 * 1024;
const SLOW_PAUSE: Duration = Duration::from_millis(100);

/// The remote web server a fetch reads from.
struct Remote {
    addr: SocketAddr,
    /// Requests received, on any path.
    hits: Arc<AtomicUsize>,
    /// Set when the client went away before `/slow` finished its body.
    slow_abandoned: Arc<AtomicBool>,
}

#[derive(Clone)]
struct RemoteState {
    file: Bytes,
    hits: Arc<AtomicUsize>,
    slow_abandoned: Arc<AtomicBool>,
}

/// Sets `abandoned` when dropped before `finish`: the body stream of `/slow` owns one.
struct AbandonFlag {
    abandoned: Arc<AtomicBool>,
    finished: bool,
}

impl AbandonFlag {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for AbandonFlag {
    fn drop(&mut self) {
        if !self.finished {
            self.abandoned.store(true, Ordering::SeqCst);
        }
    }
}

impl Remote {
    async fn start() -> Self {
        let state =
            RemoteState { file: Bytes::from(content(FILE_SIZE)), hits: Arc::default(), slow_abandoned: Arc::default() };
        let (hits, slow_abandoned) = (state.hits.clone(), state.slow_abandoned.clone());
        let app = Router::new()
            .route("/file.bin", get(|State(state): State<RemoteState>| async move { state.file.clone() }))
            .route("/unsized", get(without_length))
            .route("/redirect", get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/file.bin")]) }))
            .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
            .route("/slow", get(slow))
            .layer(axum::middleware::from_fn_with_state(state.clone(), count_hits))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, hits, slow_abandoned }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

async fn count_hits(
    State(state): State<RemoteState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> HttpResponse {
    state.hits.fetch_add(1, Ordering::SeqCst);
    next.run(request).await
}

/// The file's bytes as a stream without `Content-Length`, so only the stream can tell its size.
async fn without_length(State(state): State<RemoteState>) -> Body {
    let pieces: Vec<Result<Bytes, std::io::Error>> =
        state.file.chunks(64 * 1024).map(|piece| Ok(Bytes::copy_from_slice(piece))).collect();
    Body::from_stream(futures_util::stream::iter(pieces))
}

/// A trickle that takes about ten seconds, noticing when the client leaves early.
async fn slow(State(state): State<RemoteState>) -> Body {
    let flag = AbandonFlag { abandoned: state.slow_abandoned.clone(), finished: false };
    Body::from_stream(futures_util::stream::unfold((0, flag), |(sent, mut flag)| async move {
        if sent == SLOW_PIECES {
            flag.finish();
            return None;
        }
        tokio::time::sleep(SLOW_PAUSE).await;
        Some((Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; SLOW_PIECE])), (sent + 1, flag)))
    }))
}

/// A stand-in for the master's router: records the node's reports and answers them as the
/// master would (skipping signature checks, which the protocol crate's own tests cover).
struct FakeMaster {
    base: String,
    calls: Arc<Mutex<Vec<Call>>>,
}

#[derive(Clone)]
struct MasterState {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answer progress reports with `cancel: true`.
    cancel_on_progress: bool,
}

impl FakeMaster {
    async fn start(cancel_on_progress: bool) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let state = MasterState { calls: calls.clone(), cancel_on_progress };
        let app = Router::new().route("/api/v1/node/rpc", post(master_rpc)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, calls }
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls once `settled` holds for them; panics with what arrived after 20 s.
    async fn wait_for(&self, settled: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let calls = self.calls();
            if settled(&calls) {
                return calls;
            }
            assert!(tokio::time::Instant::now() < deadline, "the master never got what it waited for: {calls:?}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The final report (complete or failed) about `task`, once it arrives.
    async fn final_report(&self, task: &str) -> Call {
        let about_task = |call: &Call| is_final(call) && task_of(call) == Some(task);
        let calls = self.wait_for(|calls| calls.iter().any(about_task)).await;
        let mut finals = calls.into_iter().filter(about_task);
        let report = finals.next().unwrap();
        assert!(finals.next().is_none(), "{task} reported twice");
        report
    }

    fn final_reports(&self) -> Vec<Call> {
        self.calls().into_iter().filter(is_final).collect()
    }
}

fn is_final(call: &Call) -> bool {
    matches!(call, Call::ExternalDownloadComplete(_) | Call::ExternalDownloadFailed(_))
}

fn task_of(call: &Call) -> Option<&str> {
    match call {
        Call::ExternalDownloadComplete(report) => Some(&report.task_id),
        Call::ExternalDownloadFailed(report) => Some(&report.task_id),
        Call::ExternalDownloadProgress(report) => Some(&report.task_id),
        _ => None,
    }
}

async fn master_rpc(State(state): State<MasterState>, body: Bytes) -> axum::Json<Response> {
    let request = Request::parse(&body).unwrap();
    state.calls.lock().unwrap().push(request.call.clone());
    let answer = match request.call {
        Call::ExternalDownloadProgress(_) => {
            Response::success(request.id, &ExternalDownloadProgressResult { cancel: state.cancel_on_progress })
        }
        Call::ExternalDownloadComplete(_) => {
            Response::success(request.id, &ExternalDownloadCompleteResult { keep_blob: true })
        }
        _ => Response::success(request.id, &Ack {}),
    };
    axum::Json(answer)
}

/// A node that reports to `master`, optionally allowed to reach private addresses.
struct FetchNode {
    base: String,
    client: reqwest::Client,
    dir: TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl FetchNode {
    async fn start(master: &FakeMaster, allow_private: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            node_id: Some(NODE.into()),
            node_key: Some(Secret::new(KEY)),
            master_url: Some(master.base.clone()),
            fetch_allow_private_addresses: allow_private,
            report_retry_max_seconds: 1,
            ..Config::default()
        };
        let node = Node::new(config).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(node.serve(listener, async move {
            let _ = stopped.await;
        }));
        Self { base, client: reqwest::Client::new(), dir, _stop: stop }
    }

    /// A call signed by the master: the HTTP status and the JSON answer.
    async fn call(&self, call: impl Into<Call>) -> (u16, Value) {
        let body = serde_json::to_vec(&Request::new("req-1", call)).unwrap();
        let mut request = self.client.post(format!("{}{RPC_PATH}", self.base)).body(body.clone());
        for (name, value) in sign(&key(), &body, unix_now()).pairs() {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    async fn create(&self, task_id: &str, url: &str, storage_key: &str, max_size: u64) -> (u16, Value) {
        let params = ExternalDownloadCreateParams {
            task_id: task_id.into(),
            url: url.into(),
            storage_key: storage_key.into(),
            max_size,
            timeout_secs: Some(60),
        };
        self.call(params).await
    }

    fn blob(&self, storage_key: &str) -> PathBuf {
        self.dir.path().join("blobs").join(storage_key)
    }

    /// Nothing half-written remains in the store's staging area.
    fn staging_is_empty(&self) -> bool {
        std::fs::read_dir(self.dir.path().join("blobs/.staging")).map_or(true, |mut entries| entries.next().is_none())
    }
}

#[tokio::test]
async fn a_redirected_fetch_streams_into_a_blob_and_reports_its_size_and_hash() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(false).await);
    let node = FetchNode::start(&master, true).await;

    let (status, body) = node.create("task-1", &remote.url("/redirect"), "ext/task-1", 10 * 1024 * 1024).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], serde_json::json!({}));

    let Call::ExternalDownloadComplete(report) = master.final_report("task-1").await else {
        panic!("the fetch failed: {:?}", master.calls());
    };
    let served = content(FILE_SIZE);
    assert_eq!(report.task_id, "task-1");
    assert_eq!(report.storage_key, "ext/task-1");
    assert_eq!(report.size, FILE_SIZE as u64);
    assert_eq!(report.blake3.as_str(), nubo_common::hash::hash_hex(&served));
    assert_eq!(report.file_name.as_deref(), Some("file.bin"), "named after the redirect's target");
    assert_eq!(report.content_type.as_deref(), Some("application/octet-stream"));
    assert_eq!(std::fs::read(node.blob("ext/task-1")).unwrap(), served);
    assert!(node.staging_is_empty());
}

#[tokio::test]
async fn a_private_address_is_refused_at_creation_and_nothing_is_fetched() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(false).await);
    let node = FetchNode::start(&master, false).await;

    for url in [remote.url("/redirect"), format!("http://[::ffff:127.0.0.1]:{}/file.bin", remote.addr.port())] {
        let (status, body) = node.create("task-2", &url, "ext/task-2", 10 * 1024 * 1024).await;
        assert_eq!((status, error_code(&body)), (400, "invalid_params"), "{url}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("not allowed"), "{body}");
    }

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(remote.hits.load(Ordering::SeqCst), 0, "the remote was contacted");
    assert!(!node.blob("ext/task-2").exists());
    assert!(master.calls().is_empty(), "{:?}", master.calls());
}

#[tokio::test]
async fn a_name_that_resolves_to_a_private_address_fails_as_forbidden_after_dns() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(false).await);
    let node = FetchNode::start(&master, false).await;

    let url = format!("http://localhost:{}/file.bin", remote.addr.port());
    let (status, body) = node.create("task-3", &url, "ext/task-3", 10 * 1024 * 1024).await;
    assert_eq!(status, 200, "names are only checked once resolved: {body}");

    let Call::ExternalDownloadFailed(report) = master.final_report("task-3").await else {
        panic!("the fetch did not fail: {:?}", master.calls());
    };
    assert_eq!(report.reason, FailureReason::Forbidden, "{}", report.message);
    assert!(report.message.contains("not allowed"), "{}", report.message);
    assert_eq!(remote.hits.load(Ordering::SeqCst), 0, "the remote was contacted");
    assert!(!node.blob("ext/task-3").exists());
}

#[tokio::test]
async fn content_beyond_max_size_fails_as_too_large_and_leaves_no_blob() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(false).await);
    let node = FetchNode::start(&master, true).await;
    let max_size = FILE_SIZE as u64 - 1;

    // Announced by Content-Length (refused before reading) and only found out while streaming.
    for (task, path) in [("announced", "/file.bin"), ("streamed", "/unsized")] {
        let (status, body) = node.create(task, &remote.url(path), &format!("ext/{task}"), max_size).await;
        assert_eq!(status, 200, "{body}");

        let Call::ExternalDownloadFailed(report) = master.final_report(task).await else {
            panic!("{task}: the fetch did not fail: {:?}", master.calls());
        };
        assert_eq!(report.reason, FailureReason::TooLarge, "{task}: {}", report.message);
        assert!(!node.blob(&format!("ext/{task}")).exists(), "{task}");
        assert!(node.staging_is_empty(), "{task}");
    }

    // A non-success status is a failure too, with the status passed on.
    let (status, body) = node.create("missing", &remote.url("/missing"), "ext/missing", max_size).await;
    assert_eq!(status, 200, "{body}");
    let Call::ExternalDownloadFailed(report) = master.final_report("missing").await else {
        panic!("the fetch did not fail: {:?}", master.calls());
    };
    assert_eq!((report.reason, report.http_status), (FailureReason::HttpStatus, Some(404)));
}

/// Starts `/slow` as `task` and waits until the master heard of bytes arriving.
async fn start_slow_fetch(node: &FetchNode, master: &FakeMaster, remote: &Remote, task: &str) {
    let (status, body) = node.create(task, &remote.url("/slow"), "ext/slow", 10 * 1024 * 1024).await;
    assert_eq!(status, 200, "{body}");
    master
        .wait_for(|calls| {
            calls.iter().any(|call| matches!(call, Call::ExternalDownloadProgress(p) if p.downloaded > 0))
        })
        .await;
}

/// Waits until the remote sees the fetch hang up, well before `/slow` would have finished.
async fn assert_abandoned_early(remote: &Remote) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !remote.slow_abandoned.load(Ordering::SeqCst) {
        assert!(tokio::time::Instant::now() < deadline, "the fetch kept reading after the cancel");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_cancel_mid_download_stops_the_stream_leaves_no_blob_and_reports_nothing() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(false).await);
    let node = FetchNode::start(&master, true).await;
    start_slow_fetch(&node, &master, &remote, "task-5").await;

    let (status, body) = node.call(ExternalDownloadCancelParams { task_id: "task-5".into() }).await;
    assert_eq!(status, 200, "{body}");
    assert_abandoned_early(&remote).await;

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!node.blob("ext/slow").exists());
    assert!(node.staging_is_empty());
    assert!(master.final_reports().is_empty(), "{:?}", master.final_reports());
    // Cancelling again, or an unknown task, is not an error.
    let (status, body) = node.call(ExternalDownloadCancelParams { task_id: "task-5".into() }).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_master_answering_progress_with_cancel_stops_the_fetch_too() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(true).await);
    let node = FetchNode::start(&master, true).await;
    start_slow_fetch(&node, &master, &remote, "task-6").await;

    assert_abandoned_early(&remote).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!node.blob("ext/slow").exists());
    assert!(node.staging_is_empty());
    assert!(master.final_reports().is_empty(), "{:?}", master.final_reports());
}

#[tokio::test]
async fn a_running_task_id_created_again_is_acknowledged_without_a_second_fetch() {
    let (remote, master) = (Remote::start().await, FakeMaster::start(false).await);
    let node = FetchNode::start(&master, true).await;
    start_slow_fetch(&node, &master, &remote, "task-7").await;

    let (status, body) = node.create("task-7", &remote.url("/slow"), "ext/slow", 10 * 1024 * 1024).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(remote.hits.load(Ordering::SeqCst), 1);
    node.call(ExternalDownloadCancelParams { task_id: "task-7".into() }).await;
    assert_abandoned_early(&remote).await;
}
