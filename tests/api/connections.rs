//! Nobody can take every connection (issue 51, M2 and L5), proved with raw sockets against a
//! master with small limits: a user's event streams are capped (on every master, through the
//! shared store) and end when their token expires or their user is banned; one client address
//! cannot hold more than its share of connections, nor, behind a trusted proxy, of requests in
//! flight; a JSON body trickled byte by byte is cut at its deadline; and long requests leave
//! the reserved connections to short ones. Each time `/site/ping` still answers while the hogs
//! are held.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use nubo_model::config::Config;
use nubo_service::tree::events::STREAM_RECHECK;
use nubo_tests::{Backend, Session, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Longest a test waits for the server to answer or close.
const PATIENCE: Duration = Duration::from_secs(5);

async fn spawn(backend: Backend, adjust: impl FnOnce(&mut Config)) -> Option<TestApp> {
    TestApp::spawn_configured(backend, adjust).await
}

/// A raw connection to the server from the local address `from` (any of 127.0.0.0/8 reaches it,
/// so a test can be two clients on one machine).
async fn connect_from(app: &TestApp, from: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from.parse().unwrap(), 0)).unwrap();
    socket.connect(app.config.listen).await.expect("connect")
}

/// Reads up to the end of a response's head; `None` when the server closed first.
async fn read_head(stream: &mut TcpStream) -> Option<(u16, String, Vec<u8>)> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let read = async {
        loop {
            if received.windows(4).any(|w| w == b"\r\n\r\n") {
                return true;
            }
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    };
    let complete = tokio::time::timeout(PATIENCE, read).await.expect("the server neither answered nor closed in time");
    if !complete {
        return None;
    }
    let end = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&received[..end]).to_lowercase();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line");
    Some((status, head, received[end + 4..].to_vec()))
}

/// Reads a whole error answer (head and `Content-Length` body) and checks status and code.
async fn expect_error(stream: &mut TcpStream, status: u16, code: &str) -> String {
    let (got, head, mut body) = read_head(stream).await.expect("an answer, not a closed connection");
    assert_eq!(got, status, "{head}");
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .expect("a length");
    let mut buffer = [0u8; 4096];
    while body.len() < length {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buffer)).await.expect("the body").unwrap();
        assert!(n > 0, "the body was cut");
        body.extend_from_slice(&buffer[..n]);
    }
    let body: Value = serde_json::from_slice(&body).expect("a JSON body");
    assert_eq!(body["code"], code, "{head}");
    head
}

/// Opens `GET /events` on a raw connection and answers it with the status of its head.
async fn open_events(app: &TestApp, user: &Session) -> (TcpStream, u16) {
    let mut stream = connect_from(app, "127.0.0.1").await;
    let request = format!(
        "GET /api/v1/events HTTP/1.1\r\nHost: nubo\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
        user.access
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // The head only: the stream's events stay on the socket.
    let (status, ..) = read_head(&mut stream).await.expect("an answer");
    (stream, status)
}

/// `/site/ping` answers 200 on a fresh connection within a short time.
async fn assert_ping_answers(app: &TestApp, from: &str) {
    let mut stream = connect_from(app, from).await;
    let started = Instant::now();
    stream.write_all(b"GET /api/v1/site/ping HTTP/1.1\r\nHost: nubo\r\nConnection: close\r\n\r\n").await.unwrap();
    let read = tokio::time::timeout(Duration::from_secs(3), read_head(&mut stream)).await;
    let answer = read.expect("ping answers while the hogs are held");
    assert_eq!(answer.map(|(status, ..)| status), Some(200), "ping from {from}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

async fn event_streams_over_the_per_user_cap_answer_429(backend: Backend) {
    let Some(app) = spawn(backend, |c| {
        c.max_connections = 8;
        c.reserved_connections = 0;
        c.max_event_streams_per_user = 2;
    })
    .await
    else {
        return;
    };
    let user = app.register("streams@example.com", "streams-password").await;
    let (first, status) = open_events(&app, &user).await;
    assert_eq!(status, 200);
    let (_second, status) = open_events(&app, &user).await;
    assert_eq!(status, 200);
    for _ in 0..2 {
        let mut stream = connect_from(&app, "127.0.0.1").await;
        let request =
            format!("GET /api/v1/events HTTP/1.1\r\nHost: nubo\r\nAuthorization: Bearer {}\r\n\r\n", user.access);
        stream.write_all(request.as_bytes()).await.unwrap();
        expect_error(&mut stream, 429, "events.too_many_streams").await;
    }
    assert_ping_answers(&app, "127.0.0.1").await;
    // Closing a stream gives its place back.
    drop(first);
    let started = Instant::now();
    loop {
        let mut stream = connect_from(&app, "127.0.0.1").await;
        let request =
            format!("GET /api/v1/events HTTP/1.1\r\nHost: nubo\r\nAuthorization: Bearer {}\r\n\r\n", user.access);
        stream.write_all(request.as_bytes()).await.unwrap();
        let (status, ..) = read_head(&mut stream).await.expect("an answer");
        if status == 200 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the closed stream's place never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A stream read over HTTP, event by event.
struct EventReader {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl EventReader {
    async fn open(app: &TestApp, token: &str) -> Self {
        let response = reqwest::Client::new().get(app.api("/events")).bearer_auth(token).send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self { body: Box::pin(response.bytes_stream()), buffer: String::new() }
    }

    /// The next event's (type, data), or `None` when the stream ended; panics after `wait`.
    async fn next(&mut self, wait: Duration) -> Option<(String, String)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = ("message".to_owned(), String::new());
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        event.0 = value.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        event.1.push_str(value.trim());
                    }
                }
                if event.1.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some(event);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await.expect("an event or the end in time");
            match chunk {
                Some(Ok(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Reads past `ready` and asserts the stream ends with an `error` event naming `code`.
    async fn expect_end_with(&mut self, code: &str, within: Duration) {
        let started = Instant::now();
        loop {
            let (event, data) = self.next(within).await.expect("an error event before the end");
            if event == "error" {
                assert!(data.contains(code), "{data}");
                break;
            }
        }
        assert!(self.next(Duration::from_secs(2)).await.is_none(), "the stream ends after its error");
        assert!(started.elapsed() <= within, "ended within {within:?}");
    }
}

async fn a_stream_ends_when_its_token_expires(backend: Backend) {
    let Some(app) = spawn(backend, |_| {}).await else { return };
    let user = app.register("expiring@example.com", "expiring-password").await;
    // The same user's token, made to expire in two seconds.
    let tokens = app.context().tokens();
    let mut claims = tokens.verify_access(&user.access).unwrap();
    claims.exp = nubo_model::domain::time::now_ms() / 1000 + 2;
    let short = tokens.sign(&claims);
    let mut stream = EventReader::open(&app, &short).await;
    assert_eq!(stream.next(PATIENCE).await.expect("ready").0, "ready");
    stream.expect_end_with("auth.token_expired", Duration::from_secs(5)).await;
}

async fn a_banned_user_s_stream_ends_within_the_recheck(backend: Backend) {
    let Some(app) = spawn(backend, |_| {}).await else { return };
    let admin = app.login_admin().await;
    let user = app.register("banned@example.com", "banned-password").await;
    let mut stream = EventReader::open(&app, &user.access).await;
    assert_eq!(stream.next(PATIENCE).await.expect("ready").0, "ready");
    let path = format!("/admin/user/{}", user.user_id);
    let banned = app.call(Method::PATCH, &path, Some(&admin.access), Some(json!({"status": "BANNED"}))).await;
    assert_eq!(banned.status(), 200);
    stream.expect_end_with("auth.user_inactive", STREAM_RECHECK + Duration::from_secs(3)).await;
}

async fn one_address_cannot_take_every_connection(backend: Backend) {
    let Some(app) = spawn(backend, |c| {
        c.max_connections = 6;
        c.max_connections_per_address = 3;
        c.header_read_timeout_seconds = 30;
    })
    .await
    else {
        return;
    };
    // Six clients from one address each send half a request's headers and hold on.
    let mut hogs = Vec::new();
    for _ in 0..6 {
        let mut hog = connect_from(&app, "127.0.0.2").await;
        hog.write_all(b"POST /api/v1/user/session HTTP/1.1\r\nHost: nubo\r\nContent-Ty").await.unwrap();
        hogs.push(hog);
    }
    let mut closed = 0;
    for hog in &mut hogs {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(500), hog.read(&mut byte)).await {
            Ok(Ok(0) | Err(_)) => closed += 1,
            Ok(Ok(_)) => panic!("a hog got an answer to half a request"),
            Err(_) => {}
        }
    }
    assert_eq!(closed, 3, "the connections over the address's three are closed on arrival");
    assert_ping_answers(&app, "127.0.0.1").await;
}

async fn behind_a_proxy_requests_in_flight_are_capped_per_forwarded_address(backend: Backend) {
    let Some(app) = spawn(backend, |c| {
        c.max_connections = 8;
        c.reserved_connections = 0;
        c.max_connections_per_address = 2;
        c.trusted_proxies = nubo_model::config::TrustedProxies(vec!["127.0.0.1/32".parse().unwrap()]);
        c.json_body_deadline_seconds = 0;
    })
    .await
    else {
        return;
    };
    let head = |client: &str, length: usize| {
        format!(
            "POST /api/v1/user/session HTTP/1.1\r\nHost: nubo\r\nX-Forwarded-For: {client}\r\n\
             Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        )
    };
    // Two sign-ins through the proxy from one client, their bodies still arriving.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = connect_from(&app, "127.0.0.1").await;
        stream.write_all(format!("{}{{", head("203.0.113.7", 100)).as_bytes()).await.unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A third request of that client, complete, is refused while they are in flight.
    let mut third = connect_from(&app, "127.0.0.1").await;
    third.write_all(format!("{}{{}}", head("203.0.113.7", 2)).as_bytes()).await.unwrap();
    expect_error(&mut third, 429, "request.too_many_connections").await;
    // Another client behind the same proxy is served, and so is the proxy itself.
    let mut other = connect_from(&app, "127.0.0.1").await;
    other
        .write_all(b"GET /api/v1/site/ping HTTP/1.1\r\nHost: nubo\r\nX-Forwarded-For: 203.0.113.8\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_head(&mut other).await.map(|(status, ..)| status), Some(200));
    assert_ping_answers(&app, "127.0.0.1").await;
    // Once one ends, the client is served again.
    drop(held.pop());
    let started = Instant::now();
    loop {
        let mut again = connect_from(&app, "127.0.0.1").await;
        again
            .write_all(b"GET /api/v1/site/ping HTTP/1.1\r\nHost: nubo\r\nX-Forwarded-For: 203.0.113.7\r\n\r\n")
            .await
            .unwrap();
        if read_head(&mut again).await.map(|(status, ..)| status) == Some(200) {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the ended request's place never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_json_body_trickled_past_its_deadline_answers_408(backend: Backend) {
    let Some(app) = spawn(backend, |c| {
        c.body_timeout_seconds = 1;
        c.json_body_deadline_seconds = 2;
    })
    .await
    else {
        return;
    };
    let stream = connect_from(&app, "127.0.0.1").await;
    let (mut reader, mut writer) = stream.into_split();
    let head = "POST /api/v1/user/session HTTP/1.1\r\nHost: nubo\r\nContent-Type: application/json\r\n\
                Content-Length: 100\r\n\r\n";
    writer.write_all(head.as_bytes()).await.unwrap();
    // A byte every 400 ms: never a gap of `body_timeout_seconds`, 40 s in all.
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let answered = tokio::time::timeout(PATIENCE, async {
        while !received.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = reader.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buffer[..n]);
        }
    })
    .await;
    assert!(answered.is_ok(), "no answer within {PATIENCE:?}: the trickle holds the connection");
    let head = String::from_utf8_lossy(&received).to_lowercase();
    assert!(head.starts_with("http/1.1 408"), "{head}");
    assert!(head.contains("request.timeout") || head.contains("connection: close"), "{head}");
    assert!(started.elapsed() >= Duration::from_millis(1900), "not before the deadline");
    trickle.abort();
    // Streamed bodies have no such deadline: an upload of 3 s in steady pieces goes through.
    let admin = app.login_admin().await;
    let root = app.root_id(&admin).await;
    let object = app.upload(&admin, &root, "slow.bin", b"old").await;
    let id = object["id"].as_str().unwrap().to_owned();
    let pieces = futures_util::stream::unfold(0u8, |sent| async move {
        if sent == 10 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some((Ok::<_, std::io::Error>(vec![sent; 100]), sent + 1))
    });
    let response = app
        .request(Method::PATCH, &format!("/file/content?id={id}"))
        .bearer_auth(&admin.access)
        .body(reqwest::Body::wrap_stream(pieces))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
}

async fn long_requests_leave_the_reserved_connections_to_short_ones(backend: Backend) {
    let Some(app) = spawn(backend, |c| {
        // Five places for long requests; four for short ones: the harness's pooled connection,
        // the refused sixth stream until its close is seen, an idle one and a ping.
        c.max_connections = 9;
        c.reserved_connections = 4;
        c.max_event_streams_per_user = 0;
        c.max_connections_per_address = 0;
    })
    .await
    else {
        return;
    };
    let user = app.register("long@example.com", "long-password").await;
    let mut streams = Vec::new();
    for _ in 0..5 {
        let (stream, status) = open_events(&app, &user).await;
        assert_eq!(status, 200);
        streams.push(stream);
    }
    // Every place for long requests is taken: a sixth stream is refused at once.
    let mut fifth = connect_from(&app, "127.0.0.1").await;
    let request = format!("GET /api/v1/events HTTP/1.1\r\nHost: nubo\r\nAuthorization: Bearer {}\r\n\r\n", user.access);
    fifth.write_all(request.as_bytes()).await.unwrap();
    let head = expect_error(&mut fifth, 503, "request.server_busy").await;
    assert!(head.contains("retry-after:") && head.contains("connection: close"), "{head}");
    // Short requests still have the reserved connections, twice over.
    let mut idle = connect_from(&app, "127.0.0.1").await;
    idle.write_all(b"GET /api/v1/site/ping HTTP/1.1\r\nHost: nubo\r\n\r\n").await.unwrap();
    assert_eq!(read_head(&mut idle).await.map(|(status, ..)| status), Some(200));
    assert_ping_answers(&app, "127.0.0.1").await;
    // A closed stream gives its place back.
    drop(streams.pop());
    let started = Instant::now();
    loop {
        let (_stream, status) = open_events(&app, &user).await;
        if status == 200 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the closed stream's place never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Declares each named `async fn(Backend)` as one test per database backend (the shared store
/// is in memory on SQLite, Redis on PostgreSQL).
macro_rules! on_both_backends {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$test(nubo_tests::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$test(nubo_tests::Backend::Postgres).await
            }
        }
    )*};
}

on_both_backends!(
    event_streams_over_the_per_user_cap_answer_429,
    a_stream_ends_when_its_token_expires,
    a_banned_user_s_stream_ends_within_the_recheck,
    one_address_cannot_take_every_connection,
    behind_a_proxy_requests_in_flight_are_capped_per_forwarded_address,
    a_json_body_trickled_past_its_deadline_answers_408,
    long_requests_leave_the_reserved_connections_to_short_ones,
);
