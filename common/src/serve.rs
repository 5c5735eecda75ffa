//! The HTTP edge the master and the storage nodes listen through: accepts connections up to a
//! cap (and up to a smaller cap per client address) and serves each over HTTP/1.1 with a
//! header-read timeout and an idle timeout, and offers a request body that fails when its client
//! stops sending. Without these, a client that sends half a request (or half a body) holds a
//! connection, and a handler, for ever, and one client can hold every connection.
//!
//! What it must not do: put a deadline on a transfer. A slow but steady upload or download is
//! never cut; only silence is. The one total deadline, [`DeadlineBody`], is for the bodies the
//! application knows to be small (JSON), which a client has no reason to trickle.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Connection-level limits; `None` switches a timeout off.
#[derive(Debug, Clone)]
pub struct EdgeLimits {
    /// Time a client has to send a request's complete headers, counted from the connection's
    /// start or the end of the previous response (so it also closes idle keep-alive connections).
    pub header_read_timeout: Option<Duration>,
    /// Time a connection may move no byte either way while no handler is working on a request
    /// (a client that stops reading a response, a stalled stream).
    pub idle_timeout: Option<Duration>,
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Connections one peer address may hold at once; a further one is closed on arrival, so
    /// one client cannot take every connection. 0: no limit.
    pub max_connections_per_address: usize,
    /// Peers the per-address cap does not apply to (reverse proxies, whose connections carry
    /// many clients; the application caps those per forwarded address).
    pub uncapped_peers: PeerFilter,
}

/// Which peer addresses a rule leaves out; the default leaves out none.
#[derive(Clone, Default)]
pub struct PeerFilter(Option<Arc<dyn Fn(IpAddr) -> bool + Send + Sync>>);

impl PeerFilter {
    pub fn new(matches: impl Fn(IpAddr) -> bool + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(matches)))
    }

    pub fn matches(&self, address: IpAddr) -> bool {
        self.0.as_ref().is_some_and(|matches| matches(address))
    }
}

impl std::fmt::Debug for PeerFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "PeerFilter(..)" } else { "PeerFilter(none)" })
    }
}

/// How many connections (or requests) each client address holds, against a cap.
#[derive(Debug)]
pub struct PerAddress {
    cap: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

impl PerAddress {
    /// Counts against `cap` per address; 0 admits everything.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { cap, held: Mutex::new(HashMap::new()) })
    }

    /// A hold for one more of `address`'s, or `None` when it has `cap` already.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Option<AddressHold> {
        let address = address.to_canonical();
        if self.cap > 0 {
            let mut held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let count = held.entry(address).or_default();
            if *count >= self.cap {
                return None;
            }
            *count += 1;
        }
        Some(AddressHold { counts: self.clone(), address })
    }
}

/// One connection or request of an address, counted until dropped.
#[derive(Debug)]
pub struct AddressHold {
    counts: Arc<PerAddress>,
    address: IpAddr,
}

impl Drop for AddressHold {
    fn drop(&mut self) {
        if self.counts.cap == 0 {
            return;
        }
        let mut held = self.counts.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = held.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.address);
            }
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and lets the
/// open connections finish their requests. Each request carries `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: EdgeLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_address = PerAddress::new(limits.max_connections_per_address);
    let connections = TaskTracker::new();
    let stop = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    loop {
        // The permit is taken before accepting: at the cap, new clients queue in the kernel's
        // backlog instead of each costing a task and a socket here.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let hold = match limits.uncapped_peers.matches(remote.ip().to_canonical()) {
            true => None,
            false => match per_address.admit(remote.ip()) {
                Some(hold) => Some(hold),
                None => {
                    // Closed unread: answering would mean reading its request first.
                    tracing::debug!(%remote, "closing a connection over the per-address cap");
                    drop(stream);
                    continue;
                }
            },
        };
        let router = router.clone();
        let stop = stop.clone();
        let limits = limits.clone();
        connections.spawn(async move {
            serve_connection(stream, remote, router, &limits, stop).await;
            drop((hold, permit));
        });
    }
    drop(listener);
    stop.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Errors of `accept` concern one connection (the client gave up) or the process (out of file
/// descriptors); in the second case, pausing keeps the loop from spinning.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!(%error, "cannot accept a connection; pausing a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

async fn serve_connection(
    stream: TcpStream,
    remote: SocketAddr,
    router: Router,
    limits: &EdgeLimits,
    stop: CancellationToken,
) {
    let mut stream = stream;
    crate::http::answer_without_delay(&mut stream);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: stream, activity: activity.clone() });
    let handlers = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let router = router.clone();
        let activity = handlers.clone();
        async move {
            let _working = activity.working();
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(remote));
            router.oneshot(request).await
        }
    });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let mut connection = pin!(builder.serve_connection(io, service));
    let mut idle = pin!(activity.idle(limits.idle_timeout));
    let mut stopping = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!(%remote, %error, "connection ended");
                }
                break;
            }
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
            () = &mut idle => {
                tracing::debug!(%remote, "closing an idle connection");
                break;
            }
        }
    }
}

/// What a connection is doing, for the idle timeout: when a byte last moved, and how many
/// handlers are working on its requests (a handler computing an answer is not idleness).
struct Activity {
    start: Instant,
    last_millis: AtomicU64,
    working: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Self { start: Instant::now(), last_millis: AtomicU64::new(0), working: AtomicUsize::new(0) }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_millis.store(now, Ordering::Relaxed);
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_millis.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }

    fn working(self: &Arc<Self>) -> Working {
        self.working.fetch_add(1, Ordering::Relaxed);
        Working(self.clone())
    }

    /// Resolves once the connection has been quiet for `timeout` with no handler working.
    async fn idle(&self, timeout: Option<Duration>) {
        let Some(timeout) = timeout else { return std::future::pending().await };
        loop {
            let quiet = self.quiet_for();
            let busy = self.working.load(Ordering::Relaxed) > 0;
            if !busy && quiet >= timeout {
                return;
            }
            tokio::time::sleep(if busy { timeout } else { timeout - quiet }).await;
        }
    }
}

/// A handler at work; the idle clock restarts when it finishes.
struct Working(Arc<Activity>);

impl Drop for Working {
    fn drop(&mut self) {
        self.0.touch();
        self.0.working.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A socket that notes in [`Activity`] each time bytes move.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.activity.touch();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let written = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        if written > 0 {
            self.activity.touch();
        }
        Poll::Ready(Ok(written))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, bufs))?;
        if written > 0 {
            self.activity.touch();
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The error a [`ProgressBody`] fails with when its client sent nothing for too long.
#[derive(Debug, thiserror::Error)]
#[error("the client sent no body bytes for {0:?}")]
pub struct BodyStalled(pub Duration);

/// Set when a request's body stalled, so the layer that wrapped it can answer 408 whatever
/// the handler made of the read error.
#[derive(Debug, Clone, Default)]
pub struct StallFlag(Arc<AtomicBool>);

impl StallFlag {
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A request body that fails with [`BodyStalled`] when, while its reader waits, no frame
/// arrives for `timeout`. The clock runs only while the reader waits and restarts at each
/// frame, so a steady trickle is never cut and a handler busy elsewhere is not counted.
pub struct ProgressBody {
    inner: Body,
    timeout: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    waiting: bool,
    flag: StallFlag,
}

impl ProgressBody {
    /// Wraps `inner`; answers the body and the flag it sets on a stall.
    pub fn new(inner: Body, timeout: Duration) -> (Self, StallFlag) {
        let flag = StallFlag::default();
        (Self { inner, timeout, deadline: None, waiting: false, flag: flag.clone() }, flag)
    }
}

impl HttpBody for ProgressBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.waiting = false;
            return Poll::Ready(frame);
        }
        let deadline = Instant::now() + this.timeout;
        let sleep = this.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !this.waiting {
            // A new wait begins: the client gets the whole timeout from now.
            sleep.as_mut().reset(deadline);
            this.waiting = true;
        }
        ready!(sleep.as_mut().poll(cx));
        this.flag.0.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(axum::Error::new(BodyStalled(this.timeout)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The error a [`DeadlineBody`] fails with when its whole body took too long.
#[derive(Debug, thiserror::Error)]
#[error("the client took over {0:?} to send the body")]
pub struct BodyTooSlow(pub Duration);

/// A request body that fails with [`BodyTooSlow`] once `limit` has passed since it was made
/// and it has not ended, however steadily it trickles: for small bodies (JSON), which a client
/// sends at once, so that a trickle of one byte at a time cannot hold a connection for long.
pub struct DeadlineBody {
    inner: Body,
    limit: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    flag: StallFlag,
}

impl DeadlineBody {
    /// Wraps `inner`, its clock starting now; answers the body and the flag it sets when late.
    pub fn new(inner: Body, limit: Duration) -> (Self, StallFlag) {
        let flag = StallFlag::default();
        let deadline = Box::pin(tokio::time::sleep(limit));
        (Self { inner, limit, deadline, flag: flag.clone() }, flag)
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.inner.is_end_stream() {
            return Pin::new(&mut this.inner).poll_frame(cx);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.flag.0.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTooSlow(this.limit)))));
        }
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps `guard` (a permit, a count) until the body is sent or dropped,
/// so a limit on requests also covers the answers they stream.
pub struct GuardedBody<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> GuardedBody<G> {
    pub fn wrap(inner: Body, guard: G) -> Body {
        Body::new(Self { inner, _guard: guard })
    }
}

impl<G: Unpin> HttpBody for GuardedBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `Some(duration)` for a positive number of seconds, `None` (no limit) for zero.
pub fn seconds(value: u64) -> Option<Duration> {
    (value > 0).then(|| Duration::from_secs(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    // Real time, in short steps (tokio's paused clock needs a feature the workspace leaves off).
    const TIMEOUT: Duration = Duration::from_millis(400);

    fn channel_body() -> (tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>, Body) {
        let (sender, mut receiver) = tokio::sync::mpsc::channel(1);
        (sender, Body::from_stream(futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))))
    }

    #[tokio::test]
    async fn a_silent_body_fails_after_the_timeout_and_sets_the_flag() {
        let (_sender, inner) = channel_body();
        let (body, flag) = ProgressBody::new(inner, TIMEOUT);
        let started = Instant::now();
        let error = body.collect().await.expect_err("the body fails");
        assert!(error.to_string().contains("no body bytes"), "{error}");
        assert!(started.elapsed() >= TIMEOUT);
        assert!(flag.is_set());
    }

    #[tokio::test]
    async fn a_steady_trickle_longer_than_the_timeout_is_not_cut() {
        let (sender, inner) = channel_body();
        tokio::spawn(async move {
            for _ in 0..8 {
                tokio::time::sleep(TIMEOUT / 4).await;
                sender.send(Ok(Bytes::from_static(b"x"))).await.unwrap();
            }
        });
        let (body, flag) = ProgressBody::new(inner, TIMEOUT);
        let bytes = body.collect().await.expect("a steady body is read whole").to_bytes();
        assert_eq!(bytes.len(), 8, "twice the timeout in all");
        assert!(!flag.is_set());
    }

    #[tokio::test]
    async fn a_working_handler_keeps_a_quiet_connection_open() {
        let activity = Arc::new(Activity::new());
        let working = activity.working();
        let idle = activity.idle(Some(TIMEOUT));
        tokio::pin!(idle);
        assert!(tokio::time::timeout(TIMEOUT * 3, &mut idle).await.is_err(), "not idle while working");
        drop(working);
        let started = Instant::now();
        idle.await;
        assert!(started.elapsed() >= TIMEOUT, "idle only a full timeout after the handler ended");
    }

    #[tokio::test]
    async fn a_steady_trickle_past_the_deadline_fails_and_sets_the_flag() {
        let (sender, inner) = channel_body();
        tokio::spawn(async move {
            for _ in 0..8 {
                tokio::time::sleep(TIMEOUT / 4).await;
                if sender.send(Ok(Bytes::from_static(b"x"))).await.is_err() {
                    return;
                }
            }
        });
        let (body, flag) = DeadlineBody::new(inner, TIMEOUT);
        let started = Instant::now();
        let error = body.collect().await.expect_err("cut at the deadline");
        assert!(error.to_string().contains("to send the body"), "{error}");
        assert!(started.elapsed() >= TIMEOUT && started.elapsed() < TIMEOUT * 2);
        assert!(flag.is_set());
    }

    #[tokio::test]
    async fn a_body_within_its_deadline_is_read_whole() {
        let (body, flag) = DeadlineBody::new(Body::from("{\"a\": 1}"), TIMEOUT);
        assert_eq!(body.collect().await.unwrap().to_bytes().as_ref(), b"{\"a\": 1}");
        assert!(!flag.is_set());
    }

    #[test]
    fn an_address_holds_at_most_its_cap_and_gets_a_place_back_on_drop() {
        let counts = PerAddress::new(2);
        let (one, two): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "::ffff:10.0.0.2".parse().unwrap());
        let first = counts.admit(one).expect("first");
        let _second = counts.admit(one).expect("second");
        assert!(counts.admit(one).is_none(), "a third is over the cap");
        assert!(counts.admit(two).is_some(), "another address counts on its own");
        drop(first);
        assert!(counts.admit(one).is_some(), "a place came back");
        assert!(PerAddress::new(0).admit(one).is_some(), "0: no limit");
    }

    #[tokio::test]
    async fn no_timeout_never_reports_idleness() {
        let activity = Activity::new();
        assert!(tokio::time::timeout(TIMEOUT, activity.idle(None)).await.is_err());
    }
}
