//! The HTTP edge: clients that stall (half a request line's headers, a body that stops, a silent
//! keep-alive connection) are cut after the configured timeouts while steady slow transfers are
//! not; JSON routes refuse an oversized declared length before reading; the connection cap;
//! `Range` edge cases; and the headers that keep users' files inert in a browser. Raw TCP clients
//! drive what an HTTP library would never send.

use std::time::{Duration, Instant};

use nubo_model::config::Config;
use nubo_tests::{Backend, TestApp};
use reqwest::Method;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest a test waits for the server to act on a timeout of one second.
const PATIENCE: Duration = Duration::from_secs(5);

async fn spawn(adjust: impl FnOnce(&mut Config)) -> TestApp {
    TestApp::spawn_configured(Backend::Sqlite, adjust).await.expect("SQLite is always available")
}

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.config.listen).await.expect("connect")
}

/// What a raw client saw: an answer, or the server closing without one.
#[derive(Debug)]
enum Seen {
    Answer { status: u16, head: String, body: Vec<u8> },
    Closed,
}

/// Reads one response (head, then a `Content-Length` body) or the connection's end; panics
/// when neither comes within [`PATIENCE`].
async fn read_answer(stream: &mut TcpStream) -> Seen {
    let mut received = Vec::new();
    let read = async {
        let mut buffer = [0u8; 4096];
        loop {
            let n = stream.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            received.extend_from_slice(&buffer[..n]);
            let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
            let head = String::from_utf8_lossy(&received[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("the server neither answered nor closed in time");
    let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
        assert!(received.is_empty(), "a partial answer: {:?}", String::from_utf8_lossy(&received));
        return Seen::Closed;
    };
    let head = String::from_utf8_lossy(&received[..end]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
    Seen::Answer { status, head, body: received[end + 4..].to_vec() }
}

/// The uniform error body of a raw answer, checked for `status` and `code`.
fn uniform_error(seen: Seen, status: u16, code: &str) -> String {
    let Seen::Answer { status: got, head, body } = seen else { panic!("expected {status}, the server closed") };
    assert_eq!(got, status, "{head}");
    let lower = head.to_lowercase();
    assert!(lower.contains("content-type: application/json"), "{head}");
    let body: Value = serde_json::from_slice(&body).expect("a JSON body");
    assert_eq!(body["code"], code);
    let id = body["request_id"].as_str().expect("request_id").to_owned();
    assert!(lower.contains(&format!("x-request-id: {id}")), "the body names the header's request id: {head}");
    lower
}

async fn half_a_request_line_s_headers_is_cut_after_the_header_timeout() {
    let app = spawn(|c| c.header_read_timeout_seconds = 1).await;
    let mut stream = connect(&app).await;
    stream.write_all(b"POST /api/v1/user/session HTTP/1.1\r\nHost: nubo\r\nContent-Ty").await.unwrap();
    let started = Instant::now();
    assert!(matches!(read_answer(&mut stream).await, Seen::Closed));
    assert!(started.elapsed() >= Duration::from_millis(900), "not before the timeout");
}

async fn a_body_that_stops_arriving_answers_408_before_sign_in() {
    let app = spawn(|c| c.body_timeout_seconds = 1).await;
    let mut stream = connect(&app).await;
    let head = "POST /api/v1/user/session HTTP/1.1\r\nHost: nubo\r\nContent-Type: application/json\r\n\
                Content-Length: 500000\r\n\r\n{";
    stream.write_all(head.as_bytes()).await.unwrap();
    let head = uniform_error(read_answer(&mut stream).await, 408, "request.timeout");
    assert!(head.contains("connection: close"), "{head}");
}

async fn a_slow_but_steady_upload_outlasts_every_timeout() {
    let app = spawn(|c| {
        c.header_read_timeout_seconds = 1;
        c.body_timeout_seconds = 1;
        c.idle_timeout_seconds = 1;
        // Streamed bodies have no total deadline (only JSON routes do).
        c.json_body_deadline_seconds = 1;
    })
    .await;
    let admin = app.login_admin().await;
    let root = app.root_id(&admin).await;
    let object = app.upload(&admin, &root, "slow.bin", b"old").await;
    let id = object["id"].as_str().unwrap().to_owned();
    // Ten pieces 400 ms apart: three seconds in all, three times each timeout.
    let pieces = futures_util::stream::unfold(0u8, |sent| async move {
        if sent == 10 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        Some((Ok::<_, std::io::Error>(vec![sent; 1000]), sent + 1))
    });
    let started = Instant::now();
    let response = app
        .request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&admin.access)
        .body(reqwest::Body::wrap_stream(pieces))
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    assert_eq!(response.json::<Value>().await.unwrap()["size"], 10_000);
}

async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let app = spawn(|c| {
        c.header_read_timeout_seconds = 0;
        c.idle_timeout_seconds = 1;
    })
    .await;
    let mut stream = connect(&app).await;
    stream.write_all(b"GET /api/v1/site/ping HTTP/1.1\r\nHost: nubo\r\n\r\n").await.unwrap();
    assert!(matches!(read_answer(&mut stream).await, Seen::Answer { status: 200, .. }));
    let started = Instant::now();
    assert!(matches!(read_answer(&mut stream).await, Seen::Closed), "closed once idle");
    assert!(started.elapsed() >= Duration::from_millis(900), "not before the timeout");
}

async fn a_declared_length_over_the_json_limit_answers_413_before_the_body() {
    let app = spawn(|c| c.max_json_body = 1000).await;
    let mut stream = connect(&app).await;
    let head = "POST /api/v1/user/session HTTP/1.1\r\nHost: nubo\r\nContent-Type: application/json\r\n\
                Content-Length: 1001\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let head = uniform_error(read_answer(&mut stream).await, 413, "request.too_large");
    assert!(head.contains("connection: close"), "{head}");
    // Streamed routes have no such limit: a chunk over it is no 413.
    let admin = app.login_admin().await;
    let root = app.root_id(&admin).await;
    let object = app.upload(&admin, &root, "big.bin", &vec![7u8; 5000]).await;
    assert_eq!(object["size"], 5000);
}

async fn connections_over_the_cap_wait_until_one_closes() {
    let app = spawn(|c| {
        c.max_connections = 1;
        c.header_read_timeout_seconds = 30;
    })
    .await;
    let holder = connect(&app).await;
    let fresh = || reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let waiting = fresh().get(app.api("/site/ping")).timeout(Duration::from_millis(700)).send().await;
    assert!(waiting.is_err_and(|e| e.is_timeout()), "a second connection is not served while the first is open");
    drop(holder);
    let served = fresh().get(app.api("/site/ping")).timeout(PATIENCE).send().await.unwrap();
    assert_eq!(served.status(), 200);
}

async fn a_garbage_request_line_gets_a_bare_400() {
    // hyper answers a request it cannot parse itself, before the application sees it, and
    // offers no way to give that answer a body: documented in docs/src/errors.md.
    let app = spawn(|_| {}).await;
    let mut stream = connect(&app).await;
    stream.write_all(b"NOT AN HTTP REQUEST\r\n\r\n").await.unwrap();
    let Seen::Answer { status, body, .. } = read_answer(&mut stream).await else { panic!("no answer") };
    assert_eq!(status, 400);
    assert!(body.is_empty());
}

/// A public source link of a fresh file `name` holding `bytes`; answers its absolute URL.
async fn source_link(app: &TestApp, name: &str, bytes: &[u8]) -> (String, String) {
    let admin = app.login_admin().await;
    let root = app.root_id(&admin).await;
    let object = app.upload(&admin, &root, name, bytes).await;
    let id = object["id"].as_str().unwrap().to_owned();
    let link: Value =
        app.call(Method::POST, &format!("/file/source/{id}"), Some(&admin.access), None).await.json().await.unwrap();
    (format!("{}{}", app.base_url, link["url"].as_str().unwrap()), id)
}

async fn ranges_follow_rfc_9110_at_the_edges() {
    let app = spawn(|_| {}).await;
    let bytes: Vec<u8> = (0..100u8).collect();
    let (url, _) = source_link(&app, "range.bin", &bytes).await;
    let get = |range: &'static str| app.client.get(&url).header("range", range).send();

    let longer_suffix = get("bytes=-1000").await.unwrap();
    assert_eq!(longer_suffix.status(), 206, "a suffix longer than the file is the whole file");
    assert_eq!(longer_suffix.headers()["content-range"], "bytes 0-99/100");
    assert_eq!(longer_suffix.bytes().await.unwrap().as_ref(), bytes.as_slice());

    let zero = get("bytes=-0").await.unwrap();
    assert_eq!(zero.headers()["content-range"], "bytes */100");
    assert_eq!(nubo_tests::error_body(zero, 416).await["code"], "download.range_not_satisfiable");

    let overlapping = get("bytes=0-10, 5-20").await.unwrap();
    assert_eq!(overlapping.status(), 200, "overlapping ranges get the whole file");
    assert_eq!(overlapping.bytes().await.unwrap().as_ref(), bytes.as_slice());
}

async fn users_html_and_svg_are_served_inert() {
    let app = spawn(|_| {}).await;
    let html = b"<html><script>alert(document.cookie)</script></html>";
    let (url, _) = source_link(&app, "page.html", html).await;
    let svg = b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>";
    let admin = app.login_admin().await;
    let root = app.root_id(&admin).await;
    let object = app.upload(&admin, &root, "image.svg", svg).await;
    let download = app.download_url(&admin, object["id"].as_str().unwrap()).await;
    for url in [url, download] {
        let response = app.client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        let headers = response.headers();
        assert!(headers["content-disposition"].to_str().unwrap().starts_with("attachment;"), "{url}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{url}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("sandbox"), "{url}: {csp}");
    }
}

macro_rules! edge_tests {
    ($($test:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            super::$test().await
        }
    )*};
}

mod on_sqlite {
    edge_tests!(
        half_a_request_line_s_headers_is_cut_after_the_header_timeout,
        a_body_that_stops_arriving_answers_408_before_sign_in,
        a_slow_but_steady_upload_outlasts_every_timeout,
        an_idle_keep_alive_connection_is_closed_after_the_idle_timeout,
        a_declared_length_over_the_json_limit_answers_413_before_the_body,
        connections_over_the_cap_wait_until_one_closes,
        a_garbage_request_line_gets_a_bare_400,
        ranges_follow_rfc_9110_at_the_edges,
        users_html_and_svg_are_served_inert,
    );
}
