//! Signatures of control-plane requests, both directions: HMAC-SHA256 with the node's key over a
//! canonical string, carried in four `x-nubo-*` headers, and their verification (skew window,
//! constant-time MAC check, replay refusal). The replay memory is the caller's (`nonce`); the
//! key lookup by node id is the caller's too.
//!
//! The canonical string is these lines joined by `\n` (no trailing newline):
//!
//! ```text
//! NUBO-RPC-HMAC-SHA256-V1          format tag, also separating these MACs from credential MACs
//! master | node                    the sending side, so a request cannot be reflected back
//! <node id>                        the x-nubo-node header
//! <HTTP method>                    uppercase, e.g. POST
//! <path>                           path and query exactly as sent (origin form, visible ASCII)
//! <timestamp>                      unix seconds, decimal, the x-nubo-timestamp header
//! <nonce>                          32 to 128 lowercase hex digits (>= 128 random bits)
//! <hex SHA-256 of the body>        lowercase
//! ```
//!
//! Every field is validated so none can contain a newline: the string is unambiguous.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::Role;
use crate::key::NodeKey;
use crate::nonce::{NonceStore, NonceStoreError};
use crate::rpc::{ErrorCode, RpcError};

/// Header names, lowercase as `http::HeaderName::from_static` wants them; on the wire they
/// match case-insensitively (`X-Nubo-Node` and so on).
pub const NODE_HEADER: &str = "x-nubo-node";
pub const TIMESTAMP_HEADER: &str = "x-nubo-timestamp";
pub const NONCE_HEADER: &str = "x-nubo-nonce";
pub const SIGNATURE_HEADER: &str = "x-nubo-signature";

/// How far a request's timestamp may be from the receiver's clock, either way, by default.
pub const DEFAULT_MAX_SKEW: Duration = Duration::from_secs(60);

/// Random bytes in a generated nonce (128 bits, 32 hex digits).
pub const NONCE_BYTES: usize = 16;
const MIN_NONCE_LEN: usize = 2 * NONCE_BYTES;
const MAX_NONCE_LEN: usize = 128;
/// Longest node id: ids are short names chosen by the administrator.
pub const MAX_NODE_ID_LEN: usize = 64;
const MAX_METHOD_LEN: usize = 16;
const MAX_PATH_LEN: usize = 8192;
const FORMAT_TAG: &str = "NUBO-RPC-HMAC-SHA256-V1";

/// The parts of an HTTP request a signature covers.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    /// `POST`, as the HTTP library spells it.
    pub method: &'a str,
    /// Path and query as sent, e.g. `/rpc` or `/rpc?x=1`; a proxy must not rewrite it.
    pub path: &'a str,
    /// The exact body bytes.
    pub body: &'a [u8],
}

/// The four signature headers, as produced by [`Signer`] or parsed by [`SignatureHeaders::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeaders {
    pub node: String,
    pub timestamp: u64,
    pub nonce: String,
    pub signature: [u8; 32],
}

impl SignatureHeaders {
    /// Reads the headers through `header`, which answers a header's raw value by (lowercase)
    /// name, e.g. `|name| headers.get(name).map(HeaderValue::as_bytes)`. Strict: one spelling
    /// per value (no leading zeros, lowercase hex), so no byte can change without the MAC seeing it.
    pub fn parse<'h>(header: impl Fn(&str) -> Option<&'h [u8]>) -> Result<Self, VerifyError> {
        let text = |name: &'static str| -> Result<&'h str, VerifyError> {
            let raw = header(name).ok_or(VerifyError::MissingHeader(name))?;
            std::str::from_utf8(raw).map_err(|_| VerifyError::MalformedHeader(name))
        };
        let node = text(NODE_HEADER)?;
        if !valid_node_id(node) {
            return Err(VerifyError::MalformedHeader(NODE_HEADER));
        }
        let timestamp =
            parse_timestamp(text(TIMESTAMP_HEADER)?).ok_or(VerifyError::MalformedHeader(TIMESTAMP_HEADER))?;
        let nonce = text(NONCE_HEADER)?;
        if !valid_nonce(nonce) {
            return Err(VerifyError::MalformedHeader(NONCE_HEADER));
        }
        let signature =
            parse_signature(text(SIGNATURE_HEADER)?).ok_or(VerifyError::MalformedHeader(SIGNATURE_HEADER))?;
        Ok(Self { node: node.to_owned(), timestamp, nonce: nonce.to_owned(), signature })
    }

    /// The headers to send, as (name, value) pairs.
    pub fn pairs(&self) -> [(&'static str, String); 4] {
        [
            (NODE_HEADER, self.node.clone()),
            (TIMESTAMP_HEADER, self.timestamp.to_string()),
            (NONCE_HEADER, self.nonce.clone()),
            (SIGNATURE_HEADER, hex::encode(self.signature)),
        ]
    }
}

/// Node ids: 1 to 64 of `A-Z a-z 0-9 . _ -`, safe in a header, a log line and a store key.
pub fn valid_node_id(id: &str) -> bool {
    (1..=MAX_NODE_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn valid_nonce(nonce: &str) -> bool {
    (MIN_NONCE_LEN..=MAX_NONCE_LEN).contains(&nonce.len()) && is_lower_hex(nonce)
}

fn valid_method(method: &str) -> bool {
    (1..=MAX_METHOD_LEN).contains(&method.len()) && method.bytes().all(|b| b.is_ascii_uppercase())
}

fn valid_path(path: &str) -> bool {
    path.starts_with('/') && path.len() <= MAX_PATH_LEN && path.bytes().all(|b| b.is_ascii_graphic())
}

/// Decimal digits with no sign and no leading zero, so each instant has one spelling.
fn parse_timestamp(text: &str) -> Option<u64> {
    let canonical =
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
    if canonical { text.parse().ok() } else { None }
}

fn parse_signature(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !is_lower_hex(text) {
        return None;
    }
    hex::decode(text).ok()?.try_into().ok()
}

/// Lowercase hex SHA-256 of `body`, the last line of the canonical string.
pub fn body_sha256_hex(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

/// A fresh nonce: 128 bits from the thread-local CSPRNG, as lowercase hex.
pub fn new_nonce() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; NONCE_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn canonical_string(
    from: Role,
    node: &str,
    request: &RequestParts<'_>,
    timestamp: u64,
    nonce: &str,
) -> Result<String, SignError> {
    if !valid_node_id(node) {
        return Err(SignError::InvalidNodeId);
    }
    if !valid_method(request.method) {
        return Err(SignError::InvalidMethod);
    }
    if !valid_path(request.path) {
        return Err(SignError::InvalidPath);
    }
    if !valid_nonce(nonce) {
        return Err(SignError::InvalidNonce);
    }
    let lines = [
        FORMAT_TAG,
        from.as_str(),
        node,
        request.method,
        request.path,
        &timestamp.to_string(),
        nonce,
        &body_sha256_hex(request.body),
    ];
    Ok(lines.join("\n"))
}

/// Why a request could not be signed: an input that no receiver could verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error("node id must be 1 to {MAX_NODE_ID_LEN} of A-Z a-z 0-9 . _ -")]
    InvalidNodeId,
    #[error("HTTP method must be 1 to {MAX_METHOD_LEN} uppercase ASCII letters")]
    InvalidMethod,
    #[error("path must start with / and contain only visible ASCII (percent-encode the rest)")]
    InvalidPath,
    #[error("nonce must be {MIN_NONCE_LEN} to {MAX_NONCE_LEN} lowercase hex digits")]
    InvalidNonce,
}

/// Signs the requests one side sends about one node: the master holds one per node, a node one
/// for itself.
#[derive(Debug, Clone)]
pub struct Signer {
    key: NodeKey,
    node: String,
    from: Role,
}

impl Signer {
    /// `from` is the side that sends (and signs); `node_id` names the node whose key this is.
    pub fn new(key: NodeKey, node_id: impl Into<String>, from: Role) -> Result<Self, SignError> {
        let node = node_id.into();
        if !valid_node_id(&node) {
            return Err(SignError::InvalidNodeId);
        }
        Ok(Self { key, node, from })
    }

    /// Signs `request` at `now` (unix seconds) with a fresh nonce.
    pub fn sign(&self, request: &RequestParts<'_>, now: u64) -> Result<SignatureHeaders, SignError> {
        self.sign_with_nonce(request, now, &new_nonce())
    }

    /// Signs with a given nonce: for tests; real requests need [`Signer::sign`]'s fresh one.
    pub fn sign_with_nonce(
        &self,
        request: &RequestParts<'_>,
        now: u64,
        nonce: &str,
    ) -> Result<SignatureHeaders, SignError> {
        let canonical = canonical_string(self.from, &self.node, request, now, nonce)?;
        let signature = self.key.tag(&[canonical.as_bytes()]);
        Ok(SignatureHeaders { node: self.node.clone(), timestamp: now, nonce: nonce.to_owned(), signature })
    }
}

/// Why a signed request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("malformed header {0}")]
    MalformedHeader(&'static str),
    /// No key for the named node; for the caller's key lookup, so every refusal maps alike.
    #[error("unknown node")]
    UnknownNode,
    #[error("timestamp {timestamp} is more than {max_skew_secs} s away from {now}")]
    Stale { timestamp: u64, now: u64, max_skew_secs: u64 },
    #[error("bad signature")]
    BadSignature,
    #[error("nonce already used")]
    Replayed,
    #[error(transparent)]
    NonceStore(#[from] NonceStoreError),
}

impl From<VerifyError> for RpcError {
    fn from(error: VerifyError) -> Self {
        let code = match &error {
            VerifyError::Stale { .. } => ErrorCode::Stale,
            VerifyError::Replayed => ErrorCode::Replayed,
            // Refused because replays cannot be ruled out right now; the sender may retry.
            VerifyError::NonceStore(_) => ErrorCode::Unavailable,
            VerifyError::MissingHeader(_)
            | VerifyError::MalformedHeader(_)
            | VerifyError::UnknownNode
            | VerifyError::BadSignature => ErrorCode::Unauthorized,
        };
        RpcError::new(code, error.to_string())
    }
}

/// Checks signed requests from one side (`expect_from`): a node verifies the master's, the
/// master its nodes'.
#[derive(Debug, Clone)]
pub struct Verifier {
    expect_from: Role,
    max_skew: Duration,
}

impl Verifier {
    pub fn new(expect_from: Role) -> Self {
        Self { expect_from, max_skew: DEFAULT_MAX_SKEW }
    }

    /// Accepts timestamps up to `max_skew` (whole seconds) from `now`, either way.
    pub fn with_max_skew(mut self, max_skew: Duration) -> Self {
        self.max_skew = max_skew;
        self
    }

    pub fn max_skew(&self) -> Duration {
        self.max_skew
    }

    /// Verifies `request` signed as `headers` with `key` at `now` (unix seconds), then records
    /// its nonce. The order matters: the cheap clock check first, the MAC next, and only an
    /// authentic request reaches the nonce store, so forgeries can neither fill it nor burn a
    /// real request's nonce.
    pub async fn verify(
        &self,
        key: &NodeKey,
        headers: &SignatureHeaders,
        request: &RequestParts<'_>,
        now: u64,
        nonces: &dyn NonceStore,
    ) -> Result<(), VerifyError> {
        let skew = self.max_skew.as_secs();
        if headers.timestamp.abs_diff(now) > skew {
            return Err(VerifyError::Stale { timestamp: headers.timestamp, now, max_skew_secs: skew });
        }
        let canonical = canonical_string(self.expect_from, &headers.node, request, headers.timestamp, &headers.nonce)
            .map_err(|_| VerifyError::BadSignature)?;
        if !key.verify(&[canonical.as_bytes()], &headers.signature) {
            return Err(VerifyError::BadSignature);
        }
        // Remember the nonce for as long as its timestamp stays acceptable (until
        // timestamp + skew, inclusive); after that the clock check alone refuses a replay.
        let remaining = headers.timestamp.saturating_add(skew).saturating_sub(now).saturating_add(1);
        if !nonces.remember(&headers.node, &headers.nonce, Duration::from_secs(remaining)).await? {
            return Err(VerifyError::Replayed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use async_trait::async_trait;
    use nubo_common::secret::Secret;
    use proptest::prelude::*;

    use super::*;
    use crate::nonce::MemoryNonceStore;

    const NOW: u64 = 1_750_000_000;
    const NONCE: &str = "00112233445566778899aabbccddeeff";

    fn key() -> NodeKey {
        NodeKey::new(&Secret::new("node-key-0123456789-0123456789-0123")).unwrap()
    }

    fn master_signer() -> Signer {
        Signer::new(key(), "node-1", Role::Master).unwrap()
    }

    fn request(body: &[u8]) -> RequestParts<'_> {
        RequestParts { method: "POST", path: "/rpc", body }
    }

    type Headers = HashMap<&'static str, Vec<u8>>;

    fn header_map(headers: &SignatureHeaders) -> Headers {
        headers.pairs().into_iter().map(|(name, value)| (name, value.into_bytes())).collect()
    }

    fn parse(map: &Headers) -> Result<SignatureHeaders, VerifyError> {
        SignatureHeaders::parse(|name| map.get(name).map(Vec::as_slice))
    }

    /// Parses `map` and verifies `request` as a node receiving from the master.
    async fn check(
        map: &Headers,
        request: &RequestParts<'_>,
        now: u64,
        store: &dyn NonceStore,
    ) -> Result<(), VerifyError> {
        let headers = parse(map)?;
        Verifier::new(Role::Master).verify(&key(), &headers, request, now, store).await
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }

    #[tokio::test]
    async fn a_signed_request_verifies() {
        let headers = master_signer().sign(&request(b"{}"), NOW).unwrap();
        assert_eq!(headers.nonce.len(), 32);
        let store = MemoryNonceStore::new();
        assert_eq!(check(&header_map(&headers), &request(b"{}"), NOW, &store).await, Ok(()));
    }

    #[test]
    fn headers_are_the_four_x_nubo_names_and_round_trip() {
        let headers = master_signer().sign_with_nonce(&request(b""), NOW, NONCE).unwrap();
        let pairs = headers.pairs();
        let names: Vec<_> = pairs.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["x-nubo-node", "x-nubo-timestamp", "x-nubo-nonce", "x-nubo-signature"]);
        assert_eq!(pairs[1].1, NOW.to_string());
        assert_eq!(pairs[3].1.len(), 64);
        assert_eq!(parse(&header_map(&headers)).unwrap(), headers);
    }

    #[test]
    fn generated_nonces_are_128_bit_hex_and_differ() {
        let (a, b) = (new_nonce(), new_nonce());
        assert!(valid_nonce(&a) && a.len() == 32);
        assert_ne!(a, b);
    }

    #[test]
    fn each_missing_header_is_named() {
        let full = header_map(&master_signer().sign(&request(b""), NOW).unwrap());
        for name in [NODE_HEADER, TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER] {
            let mut map = full.clone();
            map.remove(name);
            assert_eq!(parse(&map), Err(VerifyError::MissingHeader(name)));
        }
    }

    #[test]
    fn malformed_headers_are_named() {
        let full = header_map(&master_signer().sign(&request(b""), NOW).unwrap());
        let upper_signature = String::from_utf8(full[SIGNATURE_HEADER].clone()).unwrap().to_uppercase();
        let cases: [(&'static str, Vec<u8>); 13] = [
            (NODE_HEADER, b"".to_vec()),
            (NODE_HEADER, b"node 1".to_vec()),
            (NODE_HEADER, vec![b'n', 0xff]),
            (NODE_HEADER, "n".repeat(MAX_NODE_ID_LEN + 1).into_bytes()),
            (TIMESTAMP_HEADER, b"+1750000000".to_vec()),
            (TIMESTAMP_HEADER, b"01750000000".to_vec()),
            (TIMESTAMP_HEADER, b"1.5".to_vec()),
            (TIMESTAMP_HEADER, b"99999999999999999999999".to_vec()),
            (NONCE_HEADER, b"00112233".to_vec()),
            (NONCE_HEADER, NONCE.to_uppercase().into_bytes()),
            (SIGNATURE_HEADER, upper_signature.into_bytes()),
            (SIGNATURE_HEADER, b"abcd".to_vec()),
            (SIGNATURE_HEADER, "g".repeat(64).into_bytes()),
        ];
        for (name, value) in cases {
            let mut map = full.clone();
            map.insert(name, value.clone());
            assert_eq!(parse(&map), Err(VerifyError::MalformedHeader(name)), "{name}: {value:?}");
        }
    }

    #[tokio::test]
    async fn timestamps_outside_the_window_are_stale_both_ways() {
        let store = MemoryNonceStore::new();
        let signer = master_signer();
        for (signed_at, expect_ok) in [(NOW - 60, true), (NOW + 60, true), (NOW - 61, false), (NOW + 61, false)] {
            let map = header_map(&signer.sign(&request(b""), signed_at).unwrap());
            let outcome = check(&map, &request(b""), NOW, &store).await;
            if expect_ok {
                assert_eq!(outcome, Ok(()));
            } else {
                let stale = VerifyError::Stale { timestamp: signed_at, now: NOW, max_skew_secs: 60 };
                assert_eq!(outcome, Err(stale));
            }
        }
    }

    #[tokio::test]
    async fn the_skew_window_is_configurable() {
        let store = MemoryNonceStore::new();
        let headers = master_signer().sign(&request(b""), NOW - 100).unwrap();
        let strict = Verifier::new(Role::Master);
        assert!(matches!(
            strict.verify(&key(), &headers, &request(b""), NOW, &store).await,
            Err(VerifyError::Stale { .. })
        ));
        let lenient = Verifier::new(Role::Master).with_max_skew(Duration::from_secs(300));
        assert_eq!(lenient.max_skew(), Duration::from_secs(300));
        assert_eq!(lenient.verify(&key(), &headers, &request(b""), NOW, &store).await, Ok(()));
    }

    #[tokio::test]
    async fn a_different_key_body_method_or_path_is_a_bad_signature() {
        let store = MemoryNonceStore::new();
        let headers = master_signer().sign(&request(b"{}"), NOW).unwrap();
        let verifier = Verifier::new(Role::Master);
        let other = NodeKey::new(&Secret::new("another-key-0123456789-0123456789")).unwrap();
        let bad = Err(VerifyError::BadSignature);
        assert_eq!(verifier.verify(&other, &headers, &request(b"{}"), NOW, &store).await, bad);
        assert_eq!(verifier.verify(&key(), &headers, &request(b"{ }"), NOW, &store).await, bad);
        let put = RequestParts { method: "PUT", ..request(b"{}") };
        assert_eq!(verifier.verify(&key(), &headers, &put, NOW, &store).await, bad);
        let lower = RequestParts { method: "post", ..request(b"{}") };
        assert_eq!(verifier.verify(&key(), &headers, &lower, NOW, &store).await, bad);
        let elsewhere = RequestParts { path: "/rpc2", ..request(b"{}") };
        assert_eq!(verifier.verify(&key(), &headers, &elsewhere, NOW, &store).await, bad);
        // None of the refusals used up the nonce: the genuine request still goes through.
        assert_eq!(verifier.verify(&key(), &headers, &request(b"{}"), NOW, &store).await, Ok(()));
    }

    #[tokio::test]
    async fn a_request_cannot_be_reflected_to_its_sender() {
        let store = MemoryNonceStore::new();
        let from_master = master_signer().sign(&request(b"{}"), NOW).unwrap();
        // The master expects requests from nodes; one it signed itself must not pass.
        let at_master = Verifier::new(Role::Node);
        assert_eq!(
            at_master.verify(&key(), &from_master, &request(b"{}"), NOW, &store).await,
            Err(VerifyError::BadSignature)
        );
        let from_node = Signer::new(key(), "node-1", Role::Node).unwrap().sign(&request(b"{}"), NOW).unwrap();
        assert_eq!(at_master.verify(&key(), &from_node, &request(b"{}"), NOW, &store).await, Ok(()));
    }

    #[tokio::test]
    async fn a_signature_names_its_node() {
        let store = MemoryNonceStore::new();
        let mut headers = master_signer().sign(&request(b""), NOW).unwrap();
        headers.node = "node-2".into();
        let outcome = Verifier::new(Role::Master).verify(&key(), &headers, &request(b""), NOW, &store).await;
        assert_eq!(outcome, Err(VerifyError::BadSignature));
    }

    #[tokio::test]
    async fn a_replayed_request_is_refused() {
        let store = MemoryNonceStore::new();
        let map = header_map(&master_signer().sign(&request(b"{}"), NOW).unwrap());
        assert_eq!(check(&map, &request(b"{}"), NOW, &store).await, Ok(()));
        assert_eq!(check(&map, &request(b"{}"), NOW + 1, &store).await, Err(VerifyError::Replayed));
    }

    struct BrokenStore;

    #[async_trait]
    impl NonceStore for BrokenStore {
        async fn remember(&self, _: &str, _: &str, _: Duration) -> Result<bool, NonceStoreError> {
            Err(NonceStoreError::Unavailable("redis down".into()))
        }
    }

    #[tokio::test]
    async fn an_unavailable_nonce_store_refuses_the_request() {
        let map = header_map(&master_signer().sign(&request(b""), NOW).unwrap());
        let error = check(&map, &request(b""), NOW, &BrokenStore).await.unwrap_err();
        assert_eq!(error, VerifyError::NonceStore(NonceStoreError::Unavailable("redis down".into())));
        assert_eq!(RpcError::from(error).code, ErrorCode::Unavailable);
    }

    #[test]
    fn refusals_map_to_rpc_codes() {
        let table = [
            (VerifyError::MissingHeader(NONCE_HEADER), ErrorCode::Unauthorized),
            (VerifyError::MalformedHeader(NONCE_HEADER), ErrorCode::Unauthorized),
            (VerifyError::UnknownNode, ErrorCode::Unauthorized),
            (VerifyError::BadSignature, ErrorCode::Unauthorized),
            (VerifyError::Stale { timestamp: 1, now: 100, max_skew_secs: 60 }, ErrorCode::Stale),
            (VerifyError::Replayed, ErrorCode::Replayed),
        ];
        for (error, code) in table {
            assert_eq!(RpcError::from(error).code, code);
        }
    }

    #[test]
    fn the_signer_refuses_inputs_no_receiver_could_verify() {
        assert_eq!(Signer::new(key(), "node 1", Role::Master).unwrap_err(), SignError::InvalidNodeId);
        assert_eq!(Signer::new(key(), "", Role::Master).unwrap_err(), SignError::InvalidNodeId);
        let signer = master_signer();
        let sign = |method, path, nonce| signer.sign_with_nonce(&RequestParts { method, path, body: b"" }, NOW, nonce);
        assert_eq!(sign("post", "/rpc", NONCE), Err(SignError::InvalidMethod));
        assert_eq!(sign("", "/rpc", NONCE), Err(SignError::InvalidMethod));
        assert_eq!(sign("POST", "rpc", NONCE), Err(SignError::InvalidPath));
        assert_eq!(sign("POST", "/r pc", NONCE), Err(SignError::InvalidPath));
        assert_eq!(sign("POST", "/rpc\nx", NONCE), Err(SignError::InvalidPath));
        assert_eq!(sign("POST", "/é", NONCE), Err(SignError::InvalidPath));
        assert_eq!(sign("POST", "/rpc", "abc"), Err(SignError::InvalidNonce));
        assert!(sign("POST", "/rpc?a=1&b=%20", NONCE).is_ok());
    }

    #[test]
    fn verification_can_run_in_a_spawned_task() {
        fn assert_send<T: Send>(_: &T) {}
        let store = MemoryNonceStore::new();
        let headers = master_signer().sign(&request(b""), NOW).unwrap();
        let verifier = Verifier::new(Role::Master);
        let (key, body) = (key(), request(b""));
        assert_send(&verifier.verify(&key, &headers, &body, NOW, &store));
    }

    #[test]
    fn the_body_hash_is_hex_sha256() {
        assert_eq!(body_sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    /// A request and the headers the master signed it with, at `NOW`.
    fn arb_signed() -> impl Strategy<Value = (String, String, Vec<u8>, String)> {
        ("[A-Z]{1,10}", "/[!-~]{0,60}", prop::collection::vec(any::<u8>(), 0..300), "[0-9a-f]{32,128}")
    }

    proptest! {
        #[test]
        fn sign_then_verify_round_trips((method, path, body, nonce) in arb_signed(), now in 0u64..(1 << 40)) {
            let request = RequestParts { method: &method, path: &path, body: &body };
            let headers = master_signer().sign_with_nonce(&request, now, &nonce).unwrap();
            let store = MemoryNonceStore::new();
            prop_assert_eq!(block_on(check(&header_map(&headers), &request, now, &store)), Ok(()));
        }

        #[test]
        fn flipping_a_body_or_path_byte_fails(
            (method, path, body, nonce) in arb_signed(),
            index in any::<prop::sample::Index>(),
            mask in 1u8..0x80,
            in_body in any::<bool>(),
        ) {
            let request = RequestParts { method: &method, path: &path, body: &body };
            let map = header_map(&master_signer().sign_with_nonce(&request, NOW, &nonce).unwrap());
            let store = MemoryNonceStore::new();
            let (mut body2, mut path2) = (body.clone(), path.clone().into_bytes());
            let target = if in_body && !body2.is_empty() { &mut body2 } else { &mut path2 };
            let i = index.index(target.len());
            target[i] ^= mask;
            // The mask stays below 0x80, so an ASCII path stays ASCII (valid UTF-8).
            let path2 = String::from_utf8(path2).unwrap();
            let tampered = RequestParts { method: &method, path: &path2, body: &body2 };
            prop_assert_eq!(block_on(check(&map, &tampered, NOW, &store)), Err(VerifyError::BadSignature));
            prop_assert_eq!(block_on(check(&map, &request, NOW, &store)), Ok(()));
        }

        #[test]
        fn flipping_a_byte_of_any_signature_header_fails(
            (method, path, body, nonce) in arb_signed(),
            which in 0usize..4,
            index in any::<prop::sample::Index>(),
            mask in 1u8..=0xff,
        ) {
            let request = RequestParts { method: &method, path: &path, body: &body };
            let map = header_map(&master_signer().sign_with_nonce(&request, NOW, &nonce).unwrap());
            let name = [NODE_HEADER, TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER][which];
            let mut tampered = map.clone();
            let value = tampered.get_mut(name).unwrap();
            let i = index.index(value.len());
            value[i] ^= mask;
            let store = MemoryNonceStore::new();
            prop_assert!(block_on(check(&tampered, &request, NOW, &store)).is_err());
            prop_assert_eq!(block_on(check(&map, &request, NOW, &store)), Ok(()));
        }

        #[test]
        fn garbage_headers_are_refused_never_panic(
            values in prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..80)), 4),
        ) {
            let names = [NODE_HEADER, TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER];
            let map: Headers =
                names.into_iter().zip(values).filter_map(|(name, value)| Some((name, value?))).collect();
            let store = MemoryNonceStore::new();
            prop_assert!(block_on(check(&map, &request(b""), NOW, &store)).is_err());
        }

        #[test]
        fn a_nonce_is_accepted_once((method, path, body, nonce) in arb_signed(), later in 0u64..=60) {
            let request = RequestParts { method: &method, path: &path, body: &body };
            let map = header_map(&master_signer().sign_with_nonce(&request, NOW, &nonce).unwrap());
            let store = MemoryNonceStore::new();
            prop_assert_eq!(block_on(check(&map, &request, NOW, &store)), Ok(()));
            prop_assert_eq!(block_on(check(&map, &request, NOW + later, &store)), Err(VerifyError::Replayed));
        }

        #[test]
        fn timestamps_beyond_the_skew_are_stale(
            beyond in 1u64..1_000_000,
            future in any::<bool>(),
            skew in 0u64..600,
        ) {
            let signed_at = if future { NOW + skew + beyond } else { NOW - skew - beyond };
            let headers = master_signer().sign(&request(b""), signed_at).unwrap();
            let verifier = Verifier::new(Role::Master).with_max_skew(Duration::from_secs(skew));
            let store = MemoryNonceStore::new();
            let outcome = block_on(verifier.verify(&key(), &headers, &request(b""), NOW, &store));
            prop_assert!(matches!(outcome, Err(VerifyError::Stale { .. })), "{:?}", outcome);
            prop_assert!(store.is_empty());
        }
    }
}
