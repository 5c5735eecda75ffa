//! The control-plane method table: each method's stable wire name, which side handles it, its
//! typed params and result, and the [`Call`] a receiver parses a request into. Envelopes and
//! errors live in `rpc`; nothing here does I/O.
//!
//! Wire names are snake_case (`upload_session_create`) and never change once published; a new
//! method is a new name. Receivers ignore unknown fields, so adding an optional field to params
//! or a result stays compatible; anything else bumps `PROTOCOL_VERSION`. Sizes are bytes, times
//! are unix seconds, hashes are lowercase hex.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::Role;

/// A method's params type, bound to its method and its result type, so a caller cannot send the
/// params of one method and read the answer as another's.
pub trait RpcCall: Serialize + DeserializeOwned + Into<Call> {
    const METHOD: Method;
    type Result: Serialize + DeserializeOwned;
}

// One line per method generates the enum, the name table, the typed call and the bindings, so
// the four can never disagree.
macro_rules! methods {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $wire:literal, handled by [$($role:ident),+], $params:ident => $result:ident;
    )*) => {
        /// Every control-plane method.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[$doc])* $variant,)*
        }

        impl Method {
            pub const ALL: &'static [Method] = &[$(Method::$variant,)*];

            /// The stable wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Method::$variant => $wire,)*
                }
            }

            /// The method with this wire name; `None` for a name this version does not know.
            pub fn parse(name: &str) -> Option<Method> {
                match name {
                    $($wire => Some(Method::$variant),)*
                    _ => None,
                }
            }

            /// Whether `role` serves this method: a node refuses node-to-master methods as
            /// unknown rather than guessing what they would mean to it.
            pub fn handled_by(self, role: Role) -> bool {
                match self {
                    $(Method::$variant => matches!(role, $(Role::$role)|+),)*
                }
            }
        }

        /// A request's method with its typed params: what a receiver matches on.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Call {
            $($(#[$doc])* $variant($params),)*
        }

        impl Call {
            pub fn method(&self) -> Method {
                match self {
                    $(Call::$variant(_) => Method::$variant,)*
                }
            }

            /// Reads `params` as the params of `method`.
            pub fn from_parts(method: Method, params: Value) -> Result<Call, serde_json::Error> {
                match method {
                    $(Method::$variant => serde_json::from_value(params).map(Call::$variant),)*
                }
            }

            /// The params alone, as they go under `"params"` on the wire.
            pub fn params(&self) -> impl Serialize + '_ {
                ParamsOf(self)
            }
        }

        struct ParamsOf<'a>(&'a Call);

        impl Serialize for ParamsOf<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self.0 {
                    $(Call::$variant(params) => params.serialize(serializer),)*
                }
            }
        }

        $(
            impl RpcCall for $params {
                const METHOD: Method = Method::$variant;
                type Result = $result;
            }

            impl From<$params> for Call {
                fn from(params: $params) -> Self {
                    Call::$variant(params)
                }
            }
        )*
    };
}

methods! {
    /// Handshake and health check, sent by either side: protocol version, capabilities, space.
    Ping = "ping", handled by [Master, Node], PingParams => PingResult;
    /// Master to node: prepare the staging area of a client-direct upload.
    UploadSessionCreate = "upload_session_create", handled by [Node], UploadSessionCreateParams => Ack;
    /// Master to node: drop an upload session and its partial bytes (idempotent).
    UploadSessionAbort = "upload_session_abort", handled by [Node], UploadSessionAbortParams => Ack;
    /// Node to master: every chunk of a session arrived and the blob is in place.
    UploadComplete = "upload_complete", handled by [Master], UploadCompleteParams => UploadCompleteResult;
    /// Master to node: remove a blob (idempotent).
    BlobDelete = "blob_delete", handled by [Node], BlobDeleteParams => BlobDeleteResult;
    /// Master to node: size and age of a blob; `not_found` when absent.
    BlobStat = "blob_stat", handled by [Node], BlobStatParams => BlobStatResult;
    /// Master to node: fetch a URL into a blob in the background, reporting back by task id.
    ExternalDownloadCreate = "external_download_create", handled by [Node], ExternalDownloadCreateParams => Ack;
    /// Master to node: stop a fetch and drop its partial bytes (idempotent).
    ExternalDownloadCancel = "external_download_cancel", handled by [Node], ExternalDownloadCancelParams => Ack;
    /// Node to master: bytes fetched so far.
    ExternalDownloadProgress = "external_download_progress", handled by [Master],
        ExternalDownloadProgressParams => ExternalDownloadProgressResult;
    /// Node to master: the fetch finished and the blob is in place.
    ExternalDownloadComplete = "external_download_complete", handled by [Master],
        ExternalDownloadCompleteParams => ExternalDownloadCompleteResult;
    /// Node to master: the fetch failed for good; the node already dropped the partial bytes.
    ExternalDownloadFailed = "external_download_failed", handled by [Master], ExternalDownloadFailedParams => Ack;
    /// Master to node: make the JPEG thumbnail of a blob the node holds, so the image's bytes
    /// never cross to the master (only the small thumbnail does).
    ThumbnailRender = "thumbnail_render", handled by [Node], ThumbnailRenderParams => ThumbnailRenderResult;
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The empty answer of methods that only acknowledge (`{}` on the wire, so fields can be added).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {}

/// A blake3 content hash as 64 lowercase hex digits; parsing it here turns a malformed hash into
/// `invalid_params` before any handler sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Blake3Hex(String);

/// Not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a blake3 hash is 64 lowercase hex digits")]
pub struct InvalidHash;

impl Blake3Hex {
    pub fn parse(hex: &str) -> Result<Self, InvalidHash> {
        let lower_hex = hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if hex.len() == 64 && lower_hex { Ok(Self(hex.to_owned())) } else { Err(InvalidHash) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Blake3Hex {
    type Error = InvalidHash;

    fn try_from(hex: String) -> Result<Self, InvalidHash> {
        Self::parse(&hex)
    }
}

impl From<Blake3Hex> for String {
    fn from(hash: Blake3Hex) -> String {
        hash.0
    }
}

impl fmt::Display for Blake3Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a peer can do beyond the core methods. Names this version does not know read as
/// `Unrecognized`, so a newer peer's list still parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Accepts client-direct chunk uploads with upload credentials.
    Upload,
    /// Serves blobs with download credentials.
    Download,
    /// Runs `external_download_*` fetches.
    ExternalDownload,
    /// Answers `thumbnail_render`.
    Thumbnail,
    #[serde(other)]
    Unrecognized,
}

/// `ping` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingParams {
    /// The sender's `PROTOCOL_VERSION`; the receiver answers `incompatible_version` when it
    /// cannot speak it (see `rpc::check_protocol_version`).
    pub protocol_version: u32,
}

/// `ping` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingResult {
    /// The answering side's `PROTOCOL_VERSION`.
    pub protocol_version: u32,
    /// The answering side's program and version, e.g. `nubo-slave 0.1.0`, for diagnostics only.
    #[serde(default)]
    pub software: String,
    /// What the answering side offers (empty for the master).
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Bytes still free where the node stores blobs; `None` when unknown or not applicable.
    pub free_space: Option<u64>,
    /// Total bytes of that storage; `None` when unknown or not applicable.
    pub total_space: Option<u64>,
}

/// `upload_session_create` params: everything the node needs to accept, check and assemble the
/// chunks a client sends with an upload credential for this session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadSessionCreateParams {
    /// The master's upload session id; chunk URLs and credentials name it.
    pub session_id: String,
    /// Where the finished blob goes in the node's storage (a relative `StorageKey`).
    pub storage_key: String,
    /// Declared size of the whole blob; the node refuses bytes beyond it.
    pub size: u64,
    /// Size of every chunk but the last (a power of two of at least 1 KiB, for blake3 subtrees).
    pub chunk_size: u64,
    /// Number of chunks, `ceil(size / chunk_size)`; 0 for an empty blob.
    pub total_chunks: u64,
    /// When the session lapses; the node may then drop its partial bytes unasked.
    pub expires_at: u64,
}

/// `upload_session_abort` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadSessionAbortParams {
    /// The session to drop; an unknown session is not an error (aborts may be retried).
    pub session_id: String,
}

/// `upload_complete` params: the node's report that a session's blob is whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadCompleteParams {
    /// The session that finished.
    pub session_id: String,
    /// Actual size of the assembled blob.
    pub size: u64,
    /// blake3 of the whole content, combined from the chunk hashes.
    pub blake3: Blake3Hex,
    /// Where the blob now is on the node (the key given at session creation).
    pub storage_key: String,
}

/// `upload_complete` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadCompleteResult {
    /// False when the master de-duplicated the content against a blob it already had: the node
    /// deletes its copy.
    pub keep_blob: bool,
    /// The JSON answer for the client that sent the last chunk; the node relays it unchanged.
    pub client_body: Value,
}

/// `blob_delete` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobDeleteParams {
    /// The blob to remove.
    pub storage_key: String,
}

/// `blob_delete` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobDeleteResult {
    /// Whether the blob was there; deleting an absent blob succeeds too.
    pub existed: bool,
}

/// `blob_stat` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobStatParams {
    /// The blob to describe.
    pub storage_key: String,
}

/// `blob_stat` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobStatResult {
    /// Size in bytes.
    pub size: u64,
    /// Last modification, when the storage knows it.
    pub modified_at: Option<u64>,
}

/// `external_download_create` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadCreateParams {
    /// The master's task id; every report about this fetch names it.
    pub task_id: String,
    /// What to fetch (http or https); the node applies its own address guard on top.
    pub url: String,
    /// Where the fetched blob goes in the node's storage.
    pub storage_key: String,
    /// Most bytes to accept (the lower of the policy limit and the owner's free quota); the
    /// node stops with `too_large` as soon as the stream passes it.
    pub max_size: u64,
    /// Longest the whole fetch may take; `None` leaves the node's configured limit.
    pub timeout_secs: Option<u64>,
}

/// `external_download_cancel` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadCancelParams {
    /// The fetch to stop; an unknown or finished task is not an error.
    pub task_id: String,
}

/// `external_download_progress` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadProgressParams {
    /// The fetch this is about.
    pub task_id: String,
    /// Bytes received so far.
    pub downloaded: u64,
    /// Expected total, when the remote announced a length.
    pub total: Option<u64>,
}

/// `external_download_progress` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadProgressResult {
    /// True when the master no longer wants the fetch (cancelled task, deleted owner): the node
    /// stops as on `external_download_cancel`. Covers a cancel request that never arrived.
    #[serde(default)]
    pub cancel: bool,
}

/// `external_download_complete` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadCompleteParams {
    /// The fetch that finished.
    pub task_id: String,
    /// Where the blob is on the node (the key given at creation).
    pub storage_key: String,
    /// Size of the fetched blob.
    pub size: u64,
    /// blake3 of the fetched content.
    pub blake3: Blake3Hex,
    /// A file name the remote suggested (`Content-Disposition` or the URL path), if any.
    pub file_name: Option<String>,
    /// The remote's `Content-Type`, if any.
    pub content_type: Option<String>,
}

/// `external_download_complete` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadCompleteResult {
    /// False when the master de-duplicated the content: the node deletes its copy.
    pub keep_blob: bool,
}

/// Why an external download failed, for the task's error and for retry decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The content passed `max_size`.
    TooLarge,
    /// The fetch took longer than allowed.
    Timeout,
    /// The node's address guard refused the URL or a redirect (private, loopback, link-local).
    Forbidden,
    /// The remote answered with a non-success status (`http_status` says which).
    HttpStatus,
    /// DNS, connection or TLS failure, or the stream broke.
    Network,
    /// The node could not store the bytes.
    Storage,
    /// Stopped on request.
    Canceled,
    /// A reason this version does not know (sent by a newer node).
    #[serde(other)]
    Other,
}

/// `external_download_failed` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDownloadFailedParams {
    /// The fetch that failed.
    pub task_id: String,
    /// The kind of failure.
    pub reason: FailureReason,
    /// A human-readable detail for the task's error field (no secrets, no URLs with credentials).
    pub message: String,
    /// The remote's status when `reason` is `http_status`.
    pub http_status: Option<u16>,
}

/// `thumbnail_render` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThumbnailRenderParams {
    /// The image blob.
    pub storage_key: String,
    /// The longest side of the thumbnail, one of `nubo_common::thumbnail::SIDES`.
    pub side: u32,
}

/// `thumbnail_render` result: exactly one of the two fields is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThumbnailRenderResult {
    /// The JPEG thumbnail, base64 (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jpeg_base64: Option<String>,
    /// Why the blob gets no thumbnail (final: not an image, too many pixels, too large, too
    /// slow to decode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<nubo_common::thumbnail::Refusal>,
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::*;

    #[test]
    fn wire_names_are_unique_snake_case_and_parse_back() {
        let mut seen = HashSet::new();
        for &method in Method::ALL {
            let name = method.as_str();
            assert!(seen.insert(name), "{name} twice");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{name}");
            assert_eq!(Method::parse(name), Some(method));
            assert_eq!(method.to_string(), name);
        }
        assert_eq!(seen.len(), 12);
        assert_eq!(Method::parse("Ping"), None);
        assert_eq!(Method::parse("UPLOAD_COMPLETE"), None);
    }

    #[test]
    fn each_method_is_handled_by_the_side_it_is_sent_to() {
        let to_node = [
            Method::UploadSessionCreate,
            Method::UploadSessionAbort,
            Method::BlobDelete,
            Method::BlobStat,
            Method::ExternalDownloadCreate,
            Method::ExternalDownloadCancel,
            Method::ThumbnailRender,
        ];
        for &method in Method::ALL {
            let node = method.handled_by(Role::Node);
            let master = method.handled_by(Role::Master);
            match method {
                Method::Ping => assert!(node && master),
                m if to_node.contains(&m) => assert!(node && !master, "{m}"),
                m => assert!(master && !node, "{m}"),
            }
        }
    }

    #[test]
    fn blake3_hex_accepts_only_64_lowercase_hex_digits() {
        let good = "a".repeat(64);
        assert_eq!(Blake3Hex::parse(&good).unwrap().as_str(), good);
        for bad in ["", &"a".repeat(63), &"a".repeat(65), &"A".repeat(64), &"g".repeat(64)] {
            assert_eq!(Blake3Hex::parse(bad), Err(InvalidHash), "{bad}");
        }
        assert!(serde_json::from_value::<Blake3Hex>(json!("xyz")).is_err());
        assert_eq!(serde_json::to_value(Blake3Hex::parse(&good).unwrap()).unwrap(), json!(good));
    }

    #[test]
    fn unknown_capabilities_and_reasons_from_newer_peers_still_parse() {
        let caps: Vec<Capability> = serde_json::from_value(json!(["upload", "teleport"])).unwrap();
        assert_eq!(caps, [Capability::Upload, Capability::Unrecognized]);
        let reason: FailureReason = serde_json::from_value(json!("solar_flare")).unwrap();
        assert_eq!(reason, FailureReason::Other);
        assert_eq!(serde_json::to_value(Capability::ExternalDownload).unwrap(), json!("external_download"));
    }

    #[test]
    fn ack_is_an_empty_object_and_accepts_added_fields() {
        assert_eq!(serde_json::to_value(Ack {}).unwrap(), json!({}));
        assert_eq!(serde_json::from_value::<Ack>(json!({"later": 1})).unwrap(), Ack {});
    }

    #[test]
    fn call_binds_params_to_their_method() {
        let call = Call::from(BlobStatParams { storage_key: "a/b".into() });
        assert_eq!(call.method(), Method::BlobStat);
        assert_eq!(<BlobStatParams as RpcCall>::METHOD, Method::BlobStat);
        assert_eq!(serde_json::to_value(call.params()).unwrap(), json!({"storage_key": "a/b"}));
        let parsed = Call::from_parts(Method::BlobStat, json!({"storage_key": "a/b"})).unwrap();
        assert_eq!(parsed, call);
        assert!(Call::from_parts(Method::BlobStat, json!({"key": "a/b"})).is_err());
    }
}
