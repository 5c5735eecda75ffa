//! Data-plane credentials: compact, URL-safe tokens the master signs with a node's key so a
//! client can upload chunks to, or download a blob from, that node, which checks them without
//! asking the master. Issuing and checking only; the HTTP endpoints are the node's.
//!
//! Format: `base64url(payload) "." base64url(HMAC-SHA256(key, tag || payload))`, no padding.
//! The payload is JSON: `{"v": 1, "scope": "upload" | "download" | "write", ...grant fields}`. The
//! tag is different per scope (`nubo/credential/v1/upload\0`, `.../download\0`, `.../write\0`),
//! so a credential of one scope can never verify as another's, and neither can pass as a request signature (whose
//! canonical string starts with another tag). The payload is signed, not encrypted: it holds
//! nothing a holder of the credential may not see.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::key::NodeKey;

/// The payload version this code issues and accepts.
pub const CREDENTIAL_VERSION: u8 = 1;

/// Longest credential accepted, so a hostile string costs nothing to refuse. Real ones are a
/// few hundred characters (a long file name included).
pub const MAX_CREDENTIAL_LEN: usize = 4096;

/// What a credential allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Client-direct chunks of one upload session.
    Upload,
    /// Reading one blob.
    Download,
    /// Writing one blob in a single stream (the master moving a blob onto the node).
    Write,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Upload, Scope::Download, Scope::Write];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Upload => "upload",
            Scope::Download => "download",
            Scope::Write => "write",
        }
    }

    /// Domain-separation prefix of the MAC input; the NUL ends it, so no tag prefixes another.
    fn tag(self) -> &'static [u8] {
        match self {
            Scope::Upload => b"nubo/credential/v1/upload\0",
            Scope::Download => b"nubo/credential/v1/download\0",
            Scope::Write => b"nubo/credential/v1/write\0",
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The claims of one scope. Sealed: [`issue`] relies on every grant encoding infallibly, which
/// holds for the plain structs here.
pub trait Grant: Serialize + DeserializeOwned + sealed::Sealed {
    const SCOPE: Scope;
    /// The node the credential is for; any other node refuses it.
    fn node_id(&self) -> &str;
    /// Unix seconds from which the credential is refused.
    fn expires_at(&self) -> u64;
}

/// Lets a client `PUT` the chunks of one upload session to one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadGrant {
    /// The master's upload session id.
    #[serde(rename = "session")]
    pub session_id: String,
    /// The node that accepts the chunks.
    #[serde(rename = "node")]
    pub node_id: String,
    /// Declared size of the whole blob.
    pub size: u64,
    /// Size of every chunk but the last.
    pub chunk_size: u64,
    /// Number of chunks.
    #[serde(rename = "chunks")]
    pub total_chunks: u64,
    /// Unix seconds from which the credential is refused.
    #[serde(rename = "exp")]
    pub expires_at: u64,
}

/// Lets a client `GET` one blob from one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownloadGrant {
    /// The node that serves the blob.
    #[serde(rename = "node")]
    pub node_id: String,
    /// Where the blob is in the node's storage.
    #[serde(rename = "key")]
    pub storage_key: String,
    /// Size the master expects the blob to have; the node refuses to serve a blob of another
    /// size (a credential outliving the content it was made for). `None` skips the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// File name for `Content-Disposition`.
    #[serde(rename = "name")]
    pub file_name: String,
    /// `Content-Type` to answer with; `None` lets the node guess from the name.
    #[serde(rename = "type", default)]
    pub content_type: Option<String>,
    /// The only bytes the credential covers; `None` allows any range of the blob.
    #[serde(default)]
    pub range: Option<ByteRange>,
    /// Unix seconds from which the credential is refused.
    #[serde(rename = "exp")]
    pub expires_at: u64,
}

/// Lets the master write one blob, of at most `max_size` bytes, to one node in one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteGrant {
    /// The node that stores the blob.
    #[serde(rename = "node")]
    pub node_id: String,
    /// Where the blob goes; the node never replaces an existing blob.
    #[serde(rename = "key")]
    pub storage_key: String,
    /// Most bytes accepted; `None` for no limit beyond the node's storage.
    #[serde(rename = "max", default)]
    pub max_size: Option<u64>,
    /// Unix seconds from which the credential is refused.
    #[serde(rename = "exp")]
    pub expires_at: u64,
}

/// Bytes `start..=end` of a blob, both ends inclusive as in HTTP `Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    /// Whether bytes `start..=end` lie inside this range.
    pub fn contains(&self, start: u64, end: u64) -> bool {
        self.start <= start && start <= end && end <= self.end
    }
}

impl sealed::Sealed for UploadGrant {}
impl sealed::Sealed for DownloadGrant {}
impl sealed::Sealed for WriteGrant {}

impl Grant for WriteGrant {
    const SCOPE: Scope = Scope::Write;

    fn node_id(&self) -> &str {
        &self.node_id
    }

    fn expires_at(&self) -> u64 {
        self.expires_at
    }
}

impl Grant for UploadGrant {
    const SCOPE: Scope = Scope::Upload;

    fn node_id(&self) -> &str {
        &self.node_id
    }

    fn expires_at(&self) -> u64 {
        self.expires_at
    }
}

impl Grant for DownloadGrant {
    const SCOPE: Scope = Scope::Download;

    fn node_id(&self) -> &str {
        &self.node_id
    }

    fn expires_at(&self) -> u64 {
        self.expires_at
    }
}

/// Why a credential was refused. `code` gives a stable string for the node's error answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("malformed credential")]
    Malformed,
    #[error("credential signature does not match")]
    BadSignature,
    #[error("credential expired")]
    Expired,
    #[error("credential is for another node")]
    WrongNode,
    #[error("credential is for another kind of access")]
    WrongScope,
}

impl CredentialError {
    pub fn code(self) -> &'static str {
        match self {
            CredentialError::Malformed => "credential.malformed",
            CredentialError::BadSignature => "credential.bad_signature",
            CredentialError::Expired => "credential.expired",
            CredentialError::WrongNode => "credential.wrong_node",
            CredentialError::WrongScope => "credential.wrong_scope",
        }
    }
}

#[derive(Serialize)]
struct ClaimsOut<'a, G> {
    v: u8,
    scope: Scope,
    #[serde(flatten)]
    grant: &'a G,
}

#[derive(Deserialize)]
struct ClaimsIn<G> {
    v: u8,
    scope: Scope,
    #[serde(flatten)]
    grant: G,
}

/// A credential for `grant`, signed with the key of the node it names.
pub fn issue<G: Grant>(key: &NodeKey, grant: &G) -> String {
    let claims = ClaimsOut { v: CREDENTIAL_VERSION, scope: G::SCOPE, grant };
    // Grants are sealed plain structs of strings and integers: encoding them cannot fail.
    let payload = serde_json::to_vec(&claims).expect("a grant always encodes as JSON");
    let tag = key.tag(&[G::SCOPE.tag(), &payload]);
    format!("{}.{}", URL_SAFE_NO_PAD.encode(&payload), URL_SAFE_NO_PAD.encode(tag))
}

/// Checks `token` as a `G` credential for node `node_id` at `now` (unix seconds): the MAC in
/// constant time first (nothing unauthenticated is interpreted), then expiry, then the node.
pub fn verify<G: Grant>(key: &NodeKey, token: &str, node_id: &str, now: u64) -> Result<G, CredentialError> {
    if token.len() > MAX_CREDENTIAL_LEN {
        return Err(CredentialError::Malformed);
    }
    let (payload, tag) = token.split_once('.').ok_or(CredentialError::Malformed)?;
    // The strict decoder refuses padding and non-zero trailing bits, so each payload and tag
    // has exactly one spelling and no character can change without the check noticing.
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| CredentialError::Malformed)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| CredentialError::Malformed)?;
    if tag.len() != 32 {
        return Err(CredentialError::Malformed);
    }
    if !key.verify(&[G::SCOPE.tag(), &payload], &tag) {
        // Authentic but for another scope: say so (it helps debugging a client), yet only
        // after the other scope's MAC proved the token genuine.
        let other_scope =
            Scope::ALL.into_iter().filter(|&s| s != G::SCOPE).any(|s| key.verify(&[s.tag(), &payload], &tag));
        return Err(if other_scope { CredentialError::WrongScope } else { CredentialError::BadSignature });
    }
    let claims: ClaimsIn<G> = serde_json::from_slice(&payload).map_err(|_| CredentialError::Malformed)?;
    if claims.v != CREDENTIAL_VERSION || claims.scope != G::SCOPE {
        return Err(CredentialError::Malformed);
    }
    if now >= claims.grant.expires_at() {
        return Err(CredentialError::Expired);
    }
    if claims.grant.node_id() != node_id {
        return Err(CredentialError::WrongNode);
    }
    Ok(claims.grant)
}

#[cfg(test)]
mod tests {
    use nubo_common::secret::Secret;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const NOW: u64 = 1_750_000_000;

    fn key() -> NodeKey {
        NodeKey::new(&Secret::new("node-key-0123456789-0123456789-0123")).unwrap()
    }

    fn upload() -> UploadGrant {
        UploadGrant {
            session_id: "0196f0c4-session".into(),
            node_id: "node-1".into(),
            size: 10 << 20,
            chunk_size: 4 << 20,
            total_chunks: 3,
            expires_at: NOW + 3600,
        }
    }

    fn download() -> DownloadGrant {
        DownloadGrant {
            node_id: "node-1".into(),
            storage_key: "2026/01/ab/blob".into(),
            size: Some(1234),
            file_name: "Rapport été \"final\".pdf".into(),
            content_type: Some("application/pdf".into()),
            range: Some(ByteRange { start: 0, end: 99 }),
            expires_at: NOW + 60,
        }
    }

    /// A token whose MAC is right for `scope` but whose payload is `payload` as given.
    fn signed_raw(scope: Scope, payload: &[u8]) -> String {
        let tag = key().tag(&[scope.tag(), payload]);
        format!("{}.{}", URL_SAFE_NO_PAD.encode(payload), URL_SAFE_NO_PAD.encode(tag))
    }

    #[test]
    fn upload_and_download_credentials_round_trip() {
        let token = issue(&key(), &upload());
        assert_eq!(verify::<UploadGrant>(&key(), &token, "node-1", NOW), Ok(upload()));
        let token = issue(&key(), &download());
        assert_eq!(verify::<DownloadGrant>(&key(), &token, "node-1", NOW), Ok(download()));
    }

    #[test]
    fn credentials_are_url_safe_and_compact() {
        let token = issue(&key(), &download());
        assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')), "{token}");
        assert!(token.len() < 400, "{}", token.len());
        let payload = URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(claims["v"], json!(1));
        assert_eq!(claims["scope"], json!("download"));
        assert_eq!(claims["node"], json!("node-1"));
    }

    #[test]
    fn a_credential_expires_at_its_expiry_second() {
        let token = issue(&key(), &upload());
        let expires_at = upload().expires_at;
        assert!(verify::<UploadGrant>(&key(), &token, "node-1", expires_at - 1).is_ok());
        assert_eq!(verify::<UploadGrant>(&key(), &token, "node-1", expires_at), Err(CredentialError::Expired));
        assert_eq!(verify::<UploadGrant>(&key(), &token, "node-1", u64::MAX), Err(CredentialError::Expired));
    }

    #[test]
    fn a_credential_for_node_a_fails_on_node_b() {
        let token = issue(&key(), &upload());
        assert_eq!(verify::<UploadGrant>(&key(), &token, "node-2", NOW), Err(CredentialError::WrongNode));
    }

    #[test]
    fn scopes_never_cross() {
        let up = issue(&key(), &upload());
        let down = issue(&key(), &download());
        assert_eq!(verify::<DownloadGrant>(&key(), &up, "node-1", NOW), Err(CredentialError::WrongScope));
        assert_eq!(verify::<UploadGrant>(&key(), &down, "node-1", NOW), Err(CredentialError::WrongScope));
    }

    #[test]
    fn another_nodes_key_gives_a_bad_signature() {
        let token = issue(&key(), &upload());
        let other = NodeKey::new(&Secret::new("another-key-0123456789-0123456789")).unwrap();
        assert_eq!(verify::<UploadGrant>(&other, &token, "node-1", NOW), Err(CredentialError::BadSignature));
    }

    #[test]
    fn mangled_tokens_are_malformed() {
        let token = issue(&key(), &upload());
        let (payload, tag) = token.split_once('.').unwrap();
        let cases = [
            String::new(),
            ".".into(),
            payload.to_owned(),
            format!("{token}.x"),
            format!("{payload}.{tag}="),
            format!("{payload}.{}", &tag[..20]),
            format!("{payload}!.{tag}"),
            format!("{payload}.{tag}{}", "A".repeat(MAX_CREDENTIAL_LEN)),
        ];
        for case in cases {
            assert_eq!(verify::<UploadGrant>(&key(), &case, "node-1", NOW), Err(CredentialError::Malformed), "{case}");
        }
    }

    #[test]
    fn authentic_but_unreadable_payloads_are_malformed() {
        let mut claims = serde_json::to_value(ClaimsOut { v: 1, scope: Scope::Upload, grant: &upload() }).unwrap();
        let bad_payloads = [
            b"not json".to_vec(),
            br#"{"v": 1, "scope": "upload"}"#.to_vec(),
            {
                claims["v"] = json!(2);
                serde_json::to_vec(&claims).unwrap()
            },
            {
                claims["v"] = json!(1);
                claims["scope"] = json!("download");
                serde_json::to_vec(&claims).unwrap()
            },
        ];
        for payload in bad_payloads {
            let token = signed_raw(Scope::Upload, &payload);
            assert_eq!(verify::<UploadGrant>(&key(), &token, "node-1", NOW), Err(CredentialError::Malformed));
        }
    }

    #[test]
    fn byte_ranges_are_inclusive_and_ordered() {
        let range = ByteRange { start: 10, end: 19 };
        assert!(range.contains(10, 19));
        assert!(range.contains(15, 15));
        assert!(!range.contains(9, 12));
        assert!(!range.contains(12, 20));
        assert!(!range.contains(15, 12));
    }

    #[test]
    fn error_codes_are_stable() {
        let codes: Vec<_> = [
            CredentialError::Malformed,
            CredentialError::BadSignature,
            CredentialError::Expired,
            CredentialError::WrongNode,
            CredentialError::WrongScope,
        ]
        .into_iter()
        .map(CredentialError::code)
        .collect();
        assert_eq!(
            codes,
            [
                "credential.malformed",
                "credential.bad_signature",
                "credential.expired",
                "credential.wrong_node",
                "credential.wrong_scope"
            ]
        );
    }

    fn arb_upload() -> impl Strategy<Value = UploadGrant> {
        (".{0,40}", "[a-z0-9-]{1,20}", any::<u64>(), any::<u64>(), any::<u64>(), NOW + 1..u64::MAX).prop_map(
            |(session_id, node_id, size, chunk_size, total_chunks, expires_at)| UploadGrant {
                session_id,
                node_id,
                size,
                chunk_size,
                total_chunks,
                expires_at,
            },
        )
    }

    fn arb_download() -> impl Strategy<Value = DownloadGrant> {
        let range = prop::option::of((any::<u64>(), any::<u64>()).prop_map(|(start, end)| ByteRange { start, end }));
        (".{0,40}", ".{0,80}", any::<Option<u64>>(), ".{0,60}", prop::option::of(".{0,20}"), range, NOW + 1..u64::MAX)
            .prop_map(|(storage_key, file_name, size, node_id, content_type, range, expires_at)| DownloadGrant {
                node_id,
                storage_key,
                size,
                file_name,
                content_type,
                range,
                expires_at,
            })
    }

    proptest! {
        #[test]
        fn any_grant_round_trips(up in arb_upload(), down in arb_download()) {
            let token = issue(&key(), &up);
            prop_assert_eq!(verify::<UploadGrant>(&key(), &token, &up.node_id, NOW), Ok(up));
            let token = issue(&key(), &down);
            prop_assert_eq!(verify::<DownloadGrant>(&key(), &token, &down.node_id, NOW), Ok(down));
        }

        #[test]
        fn any_flipped_character_fails(
            grant in arb_download(),
            index in any::<prop::sample::Index>(),
            replacement in any::<char>(),
        ) {
            let token = issue(&key(), &grant);
            let mut chars: Vec<char> = token.chars().collect();
            let i = index.index(chars.len());
            prop_assume!(chars[i] != replacement);
            chars[i] = replacement;
            let tampered: String = chars.into_iter().collect();
            prop_assert!(verify::<DownloadGrant>(&key(), &tampered, &grant.node_id, NOW).is_err());
            prop_assert!(verify::<UploadGrant>(&key(), &tampered, &grant.node_id, NOW).is_err());
        }

        #[test]
        fn any_flipped_bit_fails(grant in arb_upload(), index in any::<prop::sample::Index>(), bit in 0u8..7) {
            let mut bytes = issue(&key(), &grant).into_bytes();
            let i = index.index(bytes.len());
            bytes[i] ^= 1 << bit;
            // Below bit 7 the token stays ASCII, so this tests every 7-bit neighbour.
            let tampered = String::from_utf8(bytes).unwrap();
            prop_assert!(verify::<UploadGrant>(&key(), &tampered, &grant.node_id, NOW).is_err());
        }

        #[test]
        fn garbage_strings_are_refused_never_panic(garbage in ".{0,300}|[A-Za-z0-9_-]{0,200}\\.[A-Za-z0-9_-]{0,60}") {
            prop_assert!(verify::<UploadGrant>(&key(), &garbage, "node-1", NOW).is_err());
            prop_assert!(verify::<DownloadGrant>(&key(), &garbage, "node-1", NOW).is_err());
        }
    }
}
