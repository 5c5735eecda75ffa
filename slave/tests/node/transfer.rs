//! The data plane: chunks in with upload credentials, blobs out with download credentials.

use nubo_protocol::methods::{BlobDeleteParams, BlobStatParams, UploadSessionAbortParams};
use nubo_protocol::unix_now;
use serde_json::{Value, json};

use crate::helpers::{TestNode, content, download_grant, error_code, issue, upload_grant};

const SIZE: u64 = 2500;
const CHUNK: u64 = 1024;

fn chunk(bytes: &[u8], index: usize) -> Vec<u8> {
    bytes[index * CHUNK as usize..((index + 1) * CHUNK as usize).min(bytes.len())].to_vec()
}

#[tokio::test]
async fn chunks_sent_out_of_order_complete_the_blob_and_it_downloads_byte_for_byte() {
    let node = TestNode::start().await;
    let bytes = content(SIZE as usize);
    node.create_session("sess-1", "2026/blob-1", SIZE, CHUNK).await;
    let credential = issue(&upload_grant("sess-1", SIZE, CHUNK));

    for index in [2, 0] {
        let response = node.put_chunk("sess-1", index, &credential, chunk(&bytes, index as usize)).await;
        assert_eq!(response.status(), 200);
    }
    // Sending a chunk again changes nothing.
    assert_eq!(node.put_chunk("sess-1", 0, &credential, chunk(&bytes, 0)).await.status(), 200);
    let status: Value = node
        .client
        .get(node.url("/api/v1/slave/upload/sess-1"))
        .bearer_auth(&credential)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["received"], json!([0, 2]));
    assert_eq!(status["completed"], false);

    let last: Value = node.put_chunk("sess-1", 1, &credential, chunk(&bytes, 1)).await.json().await.unwrap();
    assert_eq!(last["received"], json!([0, 1, 2]));
    assert_eq!(last["completed"], true);

    let (status, stat) = node.call(BlobStatParams { storage_key: "2026/blob-1".into() }).await;
    assert_eq!(status, 200, "{stat}");
    assert_eq!(stat["result"]["size"], SIZE);

    let token = issue(&download_grant("2026/blob-1", SIZE, "résumé.txt"));
    let response = node.client.get(node.url(&format!("/api/v1/slave/download/{token}"))).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"r_sum_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt"
    );
    assert_eq!(response.bytes().await.unwrap().as_ref(), bytes.as_slice());

    let ranged = node
        .client
        .get(node.url(&format!("/api/v1/slave/download/{token}")))
        .header("range", "bytes=1000-1099")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.headers()["content-range"], "bytes 1000-1099/2500");
    assert_eq!(ranged.bytes().await.unwrap().as_ref(), &bytes[1000..1100]);

    let head = node.client.head(node.url(&format!("/api/v1/slave/download/{token}"))).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "2500");
}

#[tokio::test]
async fn expired_foreign_node_and_other_session_upload_credentials_are_refused() {
    let node = TestNode::start().await;
    node.create_session("sess-a", "blob-a", SIZE, CHUNK).await;
    node.create_session("sess-b", "blob-b", SIZE, CHUNK).await;
    let expired = issue(&{
        let mut grant = upload_grant("sess-a", SIZE, CHUNK);
        grant.expires_at = unix_now() - 1;
        grant
    });
    let other_node = issue(&{
        let mut grant = upload_grant("sess-a", SIZE, CHUNK);
        grant.node_id = "node-2".into();
        grant
    });
    let other_session = issue(&upload_grant("sess-b", SIZE, CHUNK));
    for (credential, status, code) in [
        (expired, 401, "credential.expired"),
        (other_node, 403, "credential.wrong_node"),
        (other_session, 403, "credential.wrong_session"),
        ("garbage".to_owned(), 401, "credential.malformed"),
    ] {
        let response = node.put_chunk("sess-a", 0, &credential, vec![0; CHUNK as usize]).await;
        assert_eq!(response.status(), status, "{code}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], code);
        assert!(body["message"].is_string());
    }
}

#[tokio::test]
async fn a_chunk_of_the_wrong_length_or_index_is_refused() {
    let node = TestNode::start().await;
    node.create_session("sess-1", "blob-1", SIZE, CHUNK).await;
    let credential = issue(&upload_grant("sess-1", SIZE, CHUNK));
    let short = node.put_chunk("sess-1", 0, &credential, vec![0; 10]).await;
    assert_eq!(short.status(), 400);
    let beyond = node.put_chunk("sess-1", 3, &credential, vec![0; 10]).await;
    assert_eq!(beyond.status(), 400);
    assert_eq!(beyond.json::<Value>().await.unwrap()["code"], "upload.chunk_out_of_range");
}

#[tokio::test]
async fn download_credentials_for_another_node_or_expired_are_refused() {
    let node = TestNode::start().await;
    let mut foreign = download_grant("blob", 1, "a.txt");
    foreign.node_id = "node-2".into();
    let mut expired = download_grant("blob", 1, "a.txt");
    expired.expires_at = unix_now() - 1;
    let upload = issue(&upload_grant("sess", SIZE, CHUNK));
    for (token, status, code) in [
        (issue(&foreign), 403, "credential.wrong_node"),
        (issue(&expired), 401, "credential.expired"),
        (upload, 403, "credential.wrong_scope"),
    ] {
        let response = node.client.get(node.url(&format!("/api/v1/slave/download/{token}"))).send().await.unwrap();
        assert_eq!(response.status(), status, "{code}");
        assert_eq!(response.json::<Value>().await.unwrap()["code"], code);
    }
}

#[tokio::test]
async fn an_aborted_session_is_gone_and_blob_calls_answer_for_missing_blobs() {
    let node = TestNode::start().await;
    node.create_session("sess-1", "blob-1", SIZE, CHUNK).await;
    let (status, _) = node.call(UploadSessionAbortParams { session_id: "sess-1".into() }).await;
    assert_eq!(status, 200);
    let credential = issue(&upload_grant("sess-1", SIZE, CHUNK));
    let response = node.put_chunk("sess-1", 0, &credential, vec![0; CHUNK as usize]).await;
    assert_eq!(response.status(), 404);
    assert_eq!(response.json::<Value>().await.unwrap()["code"], "upload.session_not_found");

    let (status, body) = node.call(BlobStatParams { storage_key: "blob-1".into() }).await;
    assert_eq!((status, error_code(&body)), (404, "not_found"));
    let (status, body) = node.call(BlobDeleteParams { storage_key: "blob-1".into() }).await;
    assert_eq!(status, 200);
    assert_eq!(body["result"]["existed"], false);
}

#[tokio::test]
async fn a_session_survives_a_restart_of_the_node() {
    let node = TestNode::start().await;
    let bytes = content(SIZE as usize);
    node.create_session("sess-1", "blob-1", SIZE, CHUNK).await;
    let credential = issue(&upload_grant("sess-1", SIZE, CHUNK));
    for index in [0, 1] {
        assert_eq!(node.put_chunk("sess-1", index, &credential, chunk(&bytes, index as usize)).await.status(), 200);
    }

    let node = TestNode::start_in(node.stop()).await;
    let last: Value = node.put_chunk("sess-1", 2, &credential, chunk(&bytes, 2)).await.json().await.unwrap();
    assert_eq!(last["received"], json!([0, 1, 2]));
    assert_eq!(last["completed"], true);
    let token = issue(&download_grant("blob-1", SIZE, "a.bin"));
    let response = node.client.get(node.url(&format!("/api/v1/slave/download/{token}"))).send().await.unwrap();
    assert_eq!(response.bytes().await.unwrap().as_ref(), bytes.as_slice());
}

#[tokio::test]
async fn an_empty_blob_is_complete_as_soon_as_its_session_exists() {
    let node = TestNode::start().await;
    node.create_session("sess-0", "empty", 0, CHUNK).await;
    let (status, stat) = node.call(BlobStatParams { storage_key: "empty".into() }).await;
    assert_eq!(status, 200, "{stat}");
    assert_eq!(stat["result"]["size"], 0);
}

#[tokio::test]
async fn an_impossible_range_answers_416_with_the_blob_size() {
    let node = TestNode::start().await;
    let bytes = content(CHUNK as usize);
    node.create_session("sess-1", "blob-1", CHUNK, CHUNK).await;
    let credential = issue(&upload_grant("sess-1", CHUNK, CHUNK));
    // Without a master the completion report stays pending: 202.
    assert_eq!(node.put_chunk("sess-1", 0, &credential, bytes).await.status(), 202);
    let token = issue(&download_grant("blob-1", CHUNK, "a.bin"));
    let response = node
        .client
        .get(node.url(&format!("/api/v1/slave/download/{token}")))
        .header("range", "bytes=5000-")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 416);
    assert_eq!(response.headers()["content-range"], "bytes */1024");
    assert_eq!(response.json::<Value>().await.unwrap()["code"], "download.range");
}

#[tokio::test]
async fn errors_the_framework_produces_use_the_uniform_body() {
    let node = TestNode::start().await;
    let wrong_method = node.client.get(node.url("/api/v1/slave/rpc")).send().await.unwrap();
    assert_eq!(wrong_method.status(), 405);
    assert_eq!(wrong_method.json::<Value>().await.unwrap()["code"], "route.method_not_allowed");
    let nowhere = node.client.get(node.url("/nowhere")).send().await.unwrap();
    assert_eq!(nowhere.status(), 404);
    assert_eq!(nowhere.json::<Value>().await.unwrap()["code"], "route.not_found");
}

#[tokio::test]
async fn a_chunk_body_that_stops_arriving_answers_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let node = TestNode::start_configured(tempfile::tempdir().unwrap(), |c| c.body_timeout_seconds = 1).await;
    node.create_session("stall", "k/stall", 1024, 1024).await;
    let credential = issue(&upload_grant("stall", 1024, 1024));
    let mut stream = tokio::net::TcpStream::connect(node.base.trim_start_matches("http://")).await.unwrap();
    let head = format!(
        "PUT /api/v1/slave/upload/stall/0 HTTP/1.1\r\nHost: node\r\nAuthorization: Bearer {credential}\r\n\
         Content-Length: 1024\r\n\r\nonly ten b"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    read.expect("answered and closed within the timeout").unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request.timeout"), "{answer}");
}
