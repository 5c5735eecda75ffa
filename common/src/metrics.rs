//! Prometheus instruments shared by the master and the storage node: a registry of each server's
//! own (never the process-wide recorder, so servers sharing a process, as in the tests, keep
//! their figures apart), the middleware counting requests by route template, the body wrapper
//! counting transferred bytes, and the bearer-token check of `GET /metrics`.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use futures_util::FutureExt;
use http_body::{Frame, SizeHint};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use subtle::ConstantTimeEq;

use crate::secret::Secret;

/// Requests by route template, method and status.
pub const HTTP_REQUESTS: &str = "nubo_http_requests_total";
/// Time to the response's headers, by route template and method.
pub const HTTP_DURATION: &str = "nubo_http_request_duration_seconds";
/// Bytes received in the bodies of uploads, by route template.
pub const UPLOAD_BYTES: &str = "nubo_upload_bytes_total";
/// Bytes sent in the bodies of downloads, by route template.
pub const DOWNLOAD_BYTES: &str = "nubo_download_bytes_total";
/// Upload requests whose body is being received now.
pub const UPLOADS_IN_PROGRESS: &str = "nubo_uploads_in_progress";

/// Upper bounds of the latency histogram's buckets, in seconds: a cached listing takes
/// milliseconds, a sign-in (password hash) tens of them, a large upload chunk seconds.
const LATENCY_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Requests between two drains of the histograms into their buckets: the exporter keeps each
/// observation until a scrape or an upkeep drains it, so a server nobody scrapes must drain
/// them itself or hold every latency it ever measured.
const UPKEEP_EVERY: u64 = 4096;

/// Methods that keep their own label value; any other becomes `OTHER`, so a client inventing
/// methods cannot grow the label set.
const KNOWN_METHODS: &[&str] = &[
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "PATCH",
    "DELETE",
    "OPTIONS",
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
];

/// One server's metrics: what its handlers and middleware count, rendered on `GET /metrics`.
pub struct Registry {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.to_owned()), LATENCY_BUCKETS)
            .expect("the latency buckets are a fixed, non-empty list")
            .build_recorder();
        let handle = recorder.handle();
        let registry = Self { recorder, handle };
        registry.describe(HTTP_REQUESTS, "HTTP requests answered, by route template, method and status.");
        registry.describe(HTTP_DURATION, "Seconds from a request's arrival to its response's headers.");
        registry.describe(UPLOAD_BYTES, "Bytes received in upload bodies (chunks, content writes, WebDAV PUT).");
        registry.describe(DOWNLOAD_BYTES, "Bytes sent in download bodies (downloads, WebDAV GET).");
        registry.describe(UPLOADS_IN_PROGRESS, "Upload requests whose body is being received.");
        registry
    }

    /// Sets the `# HELP` line of `name` (whatever its kind: the text format has one line per name).
    pub fn describe(&self, name: &'static str, help: &'static str) {
        self.recorder.describe_counter(KeyName::from_const_str(name), None, SharedString::const_str(help));
    }

    pub fn counter(&self, name: &'static str, labels: &[(&'static str, &str)]) -> Counter {
        self.recorder.register_counter(&key(name, labels), &metadata())
    }

    pub fn gauge(&self, name: &'static str, labels: &[(&'static str, &str)]) -> Gauge {
        self.recorder.register_gauge(&key(name, labels), &metadata())
    }

    pub fn histogram(&self, name: &'static str, labels: &[(&'static str, &str)]) -> Histogram {
        self.recorder.register_histogram(&key(name, labels), &metadata())
    }

    /// Every series in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Drains recorded histogram observations into their buckets (see [`UPKEEP_EVERY`]).
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}

fn key(name: &'static str, labels: &[(&'static str, &str)]) -> Key {
    let labels: Vec<Label> = labels.iter().map(|(k, v)| Label::new(*k, (*v).to_owned())).collect();
    Key::from_parts(name, labels)
}

fn metadata() -> Metadata<'static> {
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()))
}

/// The content type of the Prometheus text format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `/metrics` makes of a request's `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Granted,
    /// No bearer token was presented.
    Missing,
    /// A bearer token was presented, and it is not the configured one.
    Wrong,
}

/// Checks `Authorization: Bearer <token>` against `token`. Both sides are hashed to one length
/// first and compared in constant time, so neither the token's bytes nor its length leak
/// through timing.
pub fn check_bearer(headers: &HeaderMap, token: &Secret) -> Access {
    let Some(presented) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
    else {
        return Access::Missing;
    };
    let presented = blake3::hash(presented.trim().as_bytes());
    let expected = blake3::hash(token.expose().as_bytes());
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) { Access::Granted } else { Access::Wrong }
}

/// Which way a route's body carries file bytes, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// The request body is file content (its bytes count as uploaded).
    Upload,
    /// A successful response's body is file content (its bytes count as downloaded).
    Download,
}

/// Decides, from the method and the route template, whether a request transfers file bytes.
pub type Classifier = fn(&Method, &str) -> Option<Transfer>;

/// The state of [`track_requests`]: the registry and the server's transfer routes.
pub struct HttpMetrics {
    registry: Arc<Registry>,
    classify: Classifier,
    uploads_in_progress: Gauge,
    answered: AtomicU64,
}

impl HttpMetrics {
    pub fn new(registry: Arc<Registry>, classify: Classifier) -> Self {
        let uploads_in_progress = registry.gauge(UPLOADS_IN_PROGRESS, &[]);
        Self { registry, classify, uploads_in_progress, answered: AtomicU64::new(0) }
    }
}

/// Route label of a request no route matched (the master's web app, an unknown path): one value,
/// never the raw path, whose ids would make a series per object.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Middleware (added with `Router::layer`, where axum has set [`MatchedPath`]): counts each
/// request by route template, method and status, times it to its response's headers, and counts
/// the bytes of upload and download bodies.
pub async fn track_requests(State(metrics): State<Arc<HttpMetrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED_ROUTE, MatchedPath::as_str).to_owned();
    let method = request.method().clone();
    let method_label = KNOWN_METHODS.iter().find(|known| **known == method.as_str()).copied().unwrap_or("OTHER");
    let transfer = (metrics.classify)(&method, &route);
    let registry = &metrics.registry;
    let (request, _in_progress) = if transfer == Some(Transfer::Upload) {
        let counter = registry.counter(UPLOAD_BYTES, &[("route", &route)]);
        let request = request.map(|body| Body::new(CountedBody { inner: body, counter }));
        (request, Some(InProgress::start(metrics.uploads_in_progress.clone())))
    } else {
        (request, None)
    };
    let count = |status: StatusCode| {
        registry
            .counter(HTTP_REQUESTS, &[("route", &route), ("method", method_label), ("status", status.as_str())])
            .increment(1);
        registry.histogram(HTTP_DURATION, &[("route", &route), ("method", method_label)]).record(started.elapsed());
    };
    // A handler that panics becomes a 500 further out (the server's panic layer): it is counted
    // as one here, then the panic goes on to that layer.
    let response = match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            count(StatusCode::INTERNAL_SERVER_ERROR);
            std::panic::resume_unwind(panic);
        }
    };
    let status = response.status();
    count(status);
    if metrics.answered.fetch_add(1, Ordering::Relaxed) % UPKEEP_EVERY == UPKEEP_EVERY - 1 {
        registry.upkeep();
    }
    if transfer == Some(Transfer::Download) && status.is_success() {
        let counter = registry.counter(DOWNLOAD_BYTES, &[("route", &route)]);
        return response.map(|body| Body::new(CountedBody { inner: body, counter }));
    }
    response
}

/// One upload under way in the gauge, for as long as it lives (also when the request is dropped).
struct InProgress(Gauge);

impl InProgress {
    fn start(gauge: Gauge) -> Self {
        gauge.increment(1.0);
        Self(gauge)
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// A body that adds the length of every data frame passing through to `counter`.
pub struct CountedBody {
    inner: Body,
    counter: Counter,
}

impl CountedBody {
    pub fn new(inner: Body, counter: Counter) -> Self {
        Self { inner, counter }
    }
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.counter.increment(data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(authorization).unwrap());
        headers
    }

    #[test]
    fn only_the_configured_bearer_token_is_granted() {
        let token = Secret::new("scrape-me-0123456789");
        assert_eq!(check_bearer(&headers("Bearer scrape-me-0123456789"), &token), Access::Granted);
        assert_eq!(check_bearer(&headers("Bearer scrape-me-012345678"), &token), Access::Wrong);
        assert_eq!(check_bearer(&headers("Bearer "), &token), Access::Wrong);
        assert_eq!(check_bearer(&headers("Basic c2NyYXBlOm1l"), &token), Access::Missing);
        assert_eq!(check_bearer(&HeaderMap::new(), &token), Access::Missing);
    }

    #[tokio::test]
    async fn a_handler_that_panics_is_counted_as_a_500() {
        use tower::ServiceExt;
        async fn boom() -> &'static str {
            panic!("on purpose")
        }
        let registry = Arc::new(Registry::new());
        let metrics = Arc::new(HttpMetrics::new(registry.clone(), |_, _| None));
        let app = axum::Router::new()
            .route("/boom/{id}", axum::routing::get(boom))
            .layer(axum::middleware::from_fn_with_state(metrics, track_requests));
        let request = Request::builder().uri("/boom/7").body(Body::empty()).unwrap();
        let answered = AssertUnwindSafe(app.oneshot(request)).catch_unwind().await;
        assert!(answered.is_err(), "the panic goes on to the server's panic layer");
        let text = registry.render();
        assert!(text.contains(r#"nubo_http_requests_total{route="/boom/{id}",method="GET",status="500"} 1"#), "{text}");
    }

    #[test]
    fn series_are_rendered_in_the_text_format_with_their_help() {
        let registry = Registry::new();
        registry.counter(HTTP_REQUESTS, &[("route", "/a/{id}"), ("method", "GET"), ("status", "200")]).increment(2);
        registry.histogram(HTTP_DURATION, &[("route", "/a/{id}"), ("method", "GET")]).record(0.003);
        let text = registry.render();
        assert!(text.contains("# HELP nubo_http_requests_total HTTP requests"), "{text}");
        assert!(text.contains(r#"nubo_http_requests_total{route="/a/{id}",method="GET",status="200"} 2"#), "{text}");
        assert!(
            text.contains(r#"nubo_http_request_duration_seconds_bucket{route="/a/{id}",method="GET",le="0.005"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn two_registries_keep_their_figures_apart() {
        let (one, two) = (Registry::new(), Registry::new());
        one.counter(UPLOAD_BYTES, &[("route", "/x")]).increment(5);
        assert!(one.render().contains("nubo_upload_bytes_total{route=\"/x\"} 5"));
        assert!(!two.render().contains("nubo_upload_bytes_total{route=\"/x\"}"));
    }
}
