//! A scripted WOPI client: opens a session through the API as the web app would, then calls
//! the WOPI host as Collabora Online or OnlyOffice would (access token in the query, operations
//! in `X-WOPI-Override`), signing each request with a test RSA key the way the WOPI
//! specification builds proofs; and a WOPI application's discovery server publishing the
//! public halves (the Collabora Online and OnlyOffice samples of `tests/support/wopi`).

use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use reqwest::{Method, RequestBuilder, Response};
use rsa::pkcs1v15::Pkcs1v15Sign;
use rsa::pkcs8::DecodePrivateKey;
use rsa::traits::PublicKeyParts;
use rsa::{RsaPrivateKey, RsaPublicKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::{Session, TestApp};

pub const COLLABORA_DISCOVERY: &str = include_str!("../support/wopi/collabora-discovery.xml");
pub const ONLYOFFICE_DISCOVERY: &str = include_str!("../support/wopi/onlyoffice-discovery.xml");

/// The test proof keys: the one discovery publishes as current, and as old.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestKey {
    Current,
    Old,
}

pub fn test_key(which: TestKey) -> &'static RsaPrivateKey {
    static CURRENT: OnceLock<RsaPrivateKey> = OnceLock::new();
    static OLD: OnceLock<RsaPrivateKey> = OnceLock::new();
    let (cell, pem) = match which {
        TestKey::Current => (&CURRENT, include_str!("../support/wopi/proof-key-current.pem")),
        TestKey::Old => (&OLD, include_str!("../support/wopi/proof-key-old.pem")),
    };
    cell.get_or_init(|| RsaPrivateKey::from_pkcs8_pem(pem).expect("test proof key"))
}

fn key_attributes(prefix: &str, key: &RsaPublicKey) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    format!(
        r#"{prefix}modulus="{}" {prefix}exponent="{}""#,
        engine.encode(key.n().to_bytes_be()),
        engine.encode(key.e().to_bytes_be())
    )
}

/// A discovery document from `sample` with its action URLs moved to `base` and the proof-key
/// element replaced: `current` and `old` keys (none: no proof-key element at all).
pub fn discovery_with(sample: &str, base: &str, current: Option<TestKey>, old: Option<TestKey>) -> String {
    let moved = sample.replace("https://collabora.example.com", base).replace("https://onlyoffice.example.com", base);
    let start = moved.find("<proof-key").expect("sample has a proof key");
    let end = start + moved[start..].find("/>").unwrap() + 2;
    let element = match current {
        None => String::new(),
        Some(current) => {
            let mut attributes = key_attributes("", &test_key(current).to_public_key());
            if let Some(old) = old {
                attributes = format!("{attributes} {}", key_attributes("old", &test_key(old).to_public_key()));
            }
            format!("<proof-key {attributes}/>")
        }
    };
    format!("{}{element}{}", &moved[..start], &moved[end..])
}

/// A WOPI application's discovery endpoint (`/hosting/discovery`) on 127.0.0.1, serving
/// whatever [`DiscoveryServer::serve`] last set; it stops when dropped.
pub struct DiscoveryServer {
    pub base: String,
    document: Arc<Mutex<String>>,
    _stop: oneshot::Sender<()>,
}

impl DiscoveryServer {
    /// Serves the Collabora Online sample with the test keys (current and old).
    pub async fn start() -> Self {
        let document = Arc::new(Mutex::new(String::new()));
        let served = Arc::clone(&document);
        let app = axum::Router::new().route(
            "/hosting/discovery",
            axum::routing::get(move || {
                let served = Arc::clone(&served);
                async move {
                    let body = served.lock().unwrap().clone();
                    ([("content-type", "text/xml")], body)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        let server = Self { base, document, _stop: stop };
        server.serve(COLLABORA_DISCOVERY, Some(TestKey::Current), Some(TestKey::Old));
        server
    }

    pub fn url(&self) -> String {
        format!("{}/hosting/discovery", self.base)
    }

    /// Serves `sample` with these keys from now on.
    pub fn serve(&self, sample: &str, current: Option<TestKey>, old: Option<TestKey>) {
        *self.document.lock().unwrap() = discovery_with(sample, &self.base, current, old);
    }

    /// Serves `text` as it is (a broken discovery).
    pub fn serve_raw(&self, text: &str) {
        *self.document.lock().unwrap() = text.to_owned();
    }
}

/// How a scripted client signs its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signing {
    /// The key of `X-WOPI-Proof` (none: no header).
    pub proof: Option<TestKey>,
    /// The key of `X-WOPI-ProofOld` (none: no header).
    pub proof_old: Option<TestKey>,
    /// How old the timestamp is, in milliseconds.
    pub age_ms: i64,
    /// Signs another URL than the one requested.
    pub tamper: bool,
}

impl Signing {
    pub const CURRENT: Signing = Signing { proof: Some(TestKey::Current), proof_old: None, age_ms: 0, tamper: false };
    pub const NONE: Signing = Signing { proof: None, proof_old: None, age_ms: 0, tamper: false };
}

/// .NET ticks (`X-WOPI-TimeStamp`) of a Unix time in milliseconds.
pub fn ticks(unix_ms: i64) -> i64 {
    621_355_968_000_000_000 + unix_ms * 10_000
}

/// The proof of a request as the WOPI specification builds it: the token, the URL upper-cased
/// and the timestamp, each after its length (4-byte big-endian; the timestamp 8-byte
/// big-endian), SHA-256, RSA PKCS#1 v1.5, base64.
pub fn sign(key: &RsaPrivateKey, token: &str, url: &str, timestamp: i64) -> String {
    let url = url.to_uppercase();
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&(token.len() as i32).to_be_bytes());
    bytes.extend_from_slice(token.as_bytes());
    bytes.extend_from_slice(&(url.len() as i32).to_be_bytes());
    bytes.extend_from_slice(url.as_bytes());
    bytes.extend_from_slice(&8_i32.to_be_bytes());
    bytes.extend_from_slice(&timestamp.to_be_bytes());
    let signature = key.sign(Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(&bytes)).expect("sign");
    base64::engine::general_purpose::STANDARD.encode(signature)
}

/// One WOPI session on one file, talking to the master at `base`.
#[derive(Debug, Clone)]
pub struct WopiClient {
    pub client: reqwest::Client,
    /// Where the WOPI host is reached (a master's address).
    pub base: String,
    pub file: String,
    pub token: String,
    /// `access_token_ttl` of the session (milliseconds since the epoch).
    pub ttl: i64,
    /// The session's `action_url` (null without an application).
    pub action_url: Value,
    pub signing: Signing,
}

impl TestApp {
    /// `POST /file/{file}/wopi_session` with `mode`; answers the response.
    pub async fn wopi_session(&self, session: &Session, file: &str, mode: &str) -> Response {
        self.wopi_session_with(session, file, json!({"mode": mode})).await
    }

    /// `POST /file/{file}/wopi_session` with `body`; answers the response.
    pub async fn wopi_session_with(&self, session: &Session, file: &str, body: Value) -> Response {
        self.call(Method::POST, &format!("/file/{file}/wopi_session"), Some(&session.access), Some(body)).await
    }

    /// A WOPI client for a session in `mode` (`view` or `edit`) on `file`, opened without an
    /// application (its requests need no proof).
    pub async fn wopi(&self, session: &Session, file: &str, mode: &str) -> WopiClient {
        self.wopi_with(session, file, json!({"mode": mode}), Signing::NONE).await
    }

    /// A WOPI client for a session opened with `body` (`mode`, `app_id`), signing as `signing` says.
    pub async fn wopi_with(&self, session: &Session, file: &str, body: Value, signing: Signing) -> WopiClient {
        let path = format!("/file/{file}/wopi_session");
        let response = self.call(Method::POST, &path, Some(&session.access), Some(body)).await;
        assert_eq!(response.status(), 200, "wopi session: {}", response.text().await.unwrap_or_default());
        let body: Value = response.json().await.unwrap();
        WopiClient {
            client: self.client.clone(),
            base: self.base_url.clone(),
            file: file.to_owned(),
            token: body["access_token"].as_str().unwrap().to_owned(),
            ttl: body["access_token_ttl"].as_i64().unwrap(),
            action_url: body["action_url"].clone(),
            signing,
        }
    }

    /// Adds a WOPI application by discovery URL as the administrator; answers its view.
    pub async fn add_wopi_app(&self, admin: &Session, name: &str, discovery_url: &str, internal: bool) -> Value {
        let body = json!({"name": name, "discovery_url": discovery_url, "internal": internal});
        let response = self.call(Method::POST, "/admin/wopi", Some(&admin.access), Some(body)).await;
        assert_eq!(response.status(), 201, "add WOPI application");
        response.json().await.unwrap()
    }
}

impl WopiClient {
    /// The same session on another file (a token used out of its scope).
    pub fn on_file(&self, file: &str) -> Self {
        Self { file: file.to_owned(), ..self.clone() }
    }

    /// The same session with another token.
    pub fn with_token(&self, token: &str) -> Self {
        Self { token: token.to_owned(), ..self.clone() }
    }

    /// The same session through another master.
    pub fn through(&self, base: &str) -> Self {
        Self { base: base.to_owned(), ..self.clone() }
    }

    pub fn url(&self, suffix: &str) -> String {
        format!("{}/wopi/files/{}{suffix}?access_token={}", self.base, self.file, self.token)
    }

    /// The same session signing differently.
    pub fn signing(&self, signing: Signing) -> Self {
        Self { signing, ..self.clone() }
    }

    /// A request to the WOPI host, with the proof headers `signing` asks for.
    pub fn request(&self, method: Method, suffix: &str) -> RequestBuilder {
        let url = self.url(suffix);
        let timestamp = ticks(nubo_model::domain::time::now_ms() - self.signing.age_ms);
        let signed = if self.signing.tamper { format!("{url}&x=1") } else { url.clone() };
        let mut request = self.client.request(method, url);
        if self.signing.proof.is_some() || self.signing.proof_old.is_some() {
            request = request.header("X-WOPI-TimeStamp", timestamp.to_string());
        }
        if let Some(key) = self.signing.proof {
            request = request.header("X-WOPI-Proof", sign(test_key(key), &self.token, &signed, timestamp));
        }
        if let Some(key) = self.signing.proof_old {
            request = request.header("X-WOPI-ProofOld", sign(test_key(key), &self.token, &signed, timestamp));
        }
        request
    }

    pub async fn check_file_info(&self) -> Response {
        self.request(Method::GET, "").send().await.unwrap()
    }

    /// CheckFileInfo, expected to succeed.
    pub async fn info(&self) -> Value {
        let response = self.check_file_info().await;
        assert_eq!(response.status(), 200, "CheckFileInfo");
        response.json().await.unwrap()
    }

    pub async fn get_file(&self) -> Response {
        self.request(Method::GET, "/contents").send().await.unwrap()
    }

    pub async fn put_file(&self, lock: Option<&str>, body: Vec<u8>) -> Response {
        let mut request = self.request(Method::POST, "/contents").header("X-WOPI-Override", "PUT");
        if let Some(lock) = lock {
            request = request.header("X-WOPI-Lock", lock);
        }
        request.body(body).send().await.unwrap()
    }

    /// `POST /wopi/files/{id}` with `X-WOPI-Override: operation` and `headers`.
    pub async fn operation(&self, operation: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Response {
        let mut request = self.request(Method::POST, "").header("X-WOPI-Override", operation);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(body).send().await.unwrap()
    }

    pub async fn lock(&self, lock: &str) -> Response {
        self.operation("LOCK", &[("X-WOPI-Lock", lock)], Vec::new()).await
    }

    pub async fn get_lock(&self) -> Response {
        self.operation("GET_LOCK", &[], Vec::new()).await
    }
}

/// The `X-WOPI-Lock` header of an answer (`None` when absent).
pub fn lock_header(response: &Response) -> Option<String> {
    response.headers().get("x-wopi-lock").map(|v| v.to_str().unwrap().to_owned())
}
