//! The control plane: signatures checked before anything else, typed answers for every method.

use nubo_common::secret::Secret;
use nubo_protocol::key::NodeKey;
use nubo_protocol::methods::{
    ExternalDownloadCancelParams, ExternalDownloadCreateParams, PingParams, ThumbnailRenderParams,
};
use nubo_protocol::{PROTOCOL_VERSION, unix_now};
use serde_json::json;

use crate::helpers::{TestNode, error_code, key, sign};

#[tokio::test]
async fn a_signed_ping_answers_the_protocol_version_and_capabilities() {
    let node = TestNode::start().await;
    let (status, body) = node.call(PingParams { protocol_version: PROTOCOL_VERSION }).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], "req-1");
    assert_eq!(body["result"]["protocol_version"], PROTOCOL_VERSION);
    assert_eq!(body["result"]["capabilities"], json!(["upload", "download", "external_download", "thumbnail"]));
    // The figures of the disk holding the blobs (which need not exist before the first upload).
    let free = body["result"]["free_space"].as_u64().expect("free space reported");
    let total = body["result"]["total_space"].as_u64().expect("total space reported");
    assert!(total > 0 && free <= total, "free {free} of {total}");
}

#[tokio::test]
async fn a_ping_from_another_protocol_version_is_incompatible() {
    let node = TestNode::start().await;
    let (status, body) = node.call(PingParams { protocol_version: PROTOCOL_VERSION + 1 }).await;
    assert_eq!((status, error_code(&body)), (400, "incompatible_version"));
}

#[tokio::test]
async fn a_request_signed_with_another_key_is_unauthorized() {
    let node = TestNode::start().await;
    let body = br#"{"id":"1","method":"ping","params":{"protocol_version":1}}"#.to_vec();
    let wrong = NodeKey::new(&Secret::new("another-key-0123456789-0123456789")).unwrap();
    let headers = sign(&wrong, &body, unix_now());
    let (status, answer) = node.post_rpc(body, Some(&headers)).await;
    assert_eq!((status, error_code(&answer)), (401, "unauthorized"));
}

#[tokio::test]
async fn an_unsigned_request_is_unauthorized() {
    let node = TestNode::start().await;
    let (status, answer) = node.post_rpc(br#"{"id":"1","method":"ping"}"#.to_vec(), None).await;
    assert_eq!((status, error_code(&answer)), (401, "unauthorized"));
}

#[tokio::test]
async fn a_stale_timestamp_is_refused_as_stale() {
    let node = TestNode::start().await;
    let body = br#"{"id":"1","method":"ping","params":{"protocol_version":1}}"#.to_vec();
    let headers = sign(&key(), &body, unix_now() - 3600);
    let (status, answer) = node.post_rpc(body, Some(&headers)).await;
    assert_eq!((status, error_code(&answer)), (401, "stale"));
}

#[tokio::test]
async fn a_replayed_nonce_is_refused_as_replayed() {
    let node = TestNode::start().await;
    let body = br#"{"id":"1","method":"ping","params":{"protocol_version":1}}"#.to_vec();
    let headers = sign(&key(), &body, unix_now());
    let (first, _) = node.post_rpc(body.clone(), Some(&headers)).await;
    assert_eq!(first, 200);
    let (status, answer) = node.post_rpc(body, Some(&headers)).await;
    assert_eq!((status, error_code(&answer)), (401, "replayed"));
}

#[tokio::test]
async fn unknown_and_master_side_methods_answer_unknown_method() {
    let node = TestNode::start().await;
    for method in ["frobnicate", "upload_complete"] {
        let body = serde_json::to_vec(&json!({"id": "7", "method": method, "params": {}})).unwrap();
        let headers = sign(&key(), &body, unix_now());
        let (status, answer) = node.post_rpc(body, Some(&headers)).await;
        assert_eq!((status, error_code(&answer)), (400, "unknown_method"), "{method}");
        assert_eq!(answer["id"], "7");
    }
}

#[tokio::test]
async fn an_external_download_without_a_master_to_report_to_answers_unavailable() {
    let node = TestNode::start().await;
    let params = ExternalDownloadCreateParams {
        task_id: "t1".into(),
        url: "https://example.com/file.bin".into(),
        storage_key: "ext/t1".into(),
        max_size: 1024,
        timeout_secs: None,
    };
    let (status, body) = node.call(params).await;
    assert_eq!((status, error_code(&body)), (503, "unavailable"));
    // Cancelling a fetch that is not running is not an error.
    let (status, body) = node.call(ExternalDownloadCancelParams { task_id: "t1".into() }).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_thumbnail_is_refused_with_its_reason_and_bad_calls_are_errors() {
    let node = TestNode::start().await;
    node.write_blob("pics/bomb.png", &nubo_common::thumbnail::declared_only_png(100_000, 100_000));
    node.write_blob("pics/notes.png", b"not a picture");
    let render = |key: &str, side| ThumbnailRenderParams { storage_key: key.into(), side };
    let (status, body) = node.call(render("pics/bomb.png", 256)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], json!({"refusal": "too_many_pixels"}));
    let (_, body) = node.call(render("pics/notes.png", 1024)).await;
    assert_eq!(body["result"], json!({"refusal": "not_image"}));
    let (status, body) = node.call(render("pics/none.png", 256)).await;
    assert_eq!((status, error_code(&body)), (404, "not_found"));
    let (status, body) = node.call(render("pics/bomb.png", 300)).await;
    assert_eq!((status, error_code(&body)), (400, "invalid_params"), "{body}");
}
