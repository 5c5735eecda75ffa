//! The blob storage drivers against real backends: the shared behaviour checks
//! (`nubo_common::storage::conformance`) on local disk and on an S3 server, then what only S3 has
//! (presigned downloads, key prefixes, part-size rules, error classes).

use std::time::Duration;

use bytes::Bytes;
use nubo_common::secret::Secret;
use nubo_common::storage::conformance::{Fixture, body, content, unique_key};
use nubo_common::storage::local::LocalBlobStore;
use nubo_common::storage::s3::{MIN_PART_SIZE, S3BlobStore, S3Config, STREAM_PART_SIZE};
use nubo_common::storage::{BlobStore, ByteStream, StorageError, StorageKey};
use nubo_tests::s3::S3TestServer;

/// S3 refuses parts under 5 MiB but the last: the smallest power of two above is 8 MiB.
const S3_CHUNK: u64 = 8 * 1024 * 1024;
const _: () = assert!(MIN_PART_SIZE <= S3_CHUNK);

async fn s3_fixture() -> Fixture {
    let server = S3TestServer::start().await;
    let store = S3BlobStore::new(&server.config(Some("tenant"))).expect("S3 store");
    Fixture {
        store: Box::new(store),
        chunk_size: S3_CHUNK,
        // More than two streamed parts, the last one short.
        large_stream: 2 * STREAM_PART_SIZE + 12_345,
        keep: Box::new(server),
    }
}

async fn local_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    Fixture {
        store: Box::new(LocalBlobStore::new(dir.path().join("blobs"))),
        chunk_size: 64 * 1024,
        large_stream: 1024 * 1024 + 17,
        keep: Box::new(dir),
    }
}

mod s3 {
    nubo_common::blob_store_conformance!(super::s3_fixture());
}

mod local {
    nubo_common::blob_store_conformance!(super::local_fixture());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_presigned_download_carries_the_content_disposition() {
    let server = S3TestServer::start().await;
    let store = S3BlobStore::new(&server.config(None)).unwrap();
    let key = unique_key("presigned");
    let data = content(200_000, 1);
    store.put_stream(&key, body(&data, 10_000), None).await.unwrap();
    let disposition = nubo_common::http::attachment_disposition("résumé.pdf");
    assert!(disposition.contains("filename*=UTF-8''r%C3%A9sum%C3%A9.pdf"), "{disposition}");
    let url = store.presigned_get(&key, Duration::from_secs(300), "résumé.pdf").await.unwrap().expect("a URL");
    assert!(url.starts_with(&server.endpoint), "{url}");
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("content-disposition").and_then(|v| v.to_str().ok()), Some(disposition.as_str()));
    assert!(response.bytes().await.unwrap() == data, "content differs");
    // The signature covers the disposition: changing it is refused.
    let tampered = url.replace("response-content-disposition=attachment", "response-content-disposition=inline");
    assert_ne!(tampered, url);
    assert_eq!(reqwest::get(&tampered).await.unwrap().status(), 403);
}

#[tokio::test]
async fn local_disk_has_no_presigned_download() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalBlobStore::new(dir.path().to_owned());
    let url = store.presigned_get(&unique_key("presigned"), Duration::from_secs(60), "attachment").await.unwrap();
    assert_eq!(url, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_keys_live_under_the_prefix() {
    let server = S3TestServer::start().await;
    let store = S3BlobStore::new(&server.config(Some("/tenant/a/"))).unwrap();
    let key = StorageKey::parse("2026/01/blob.bin").unwrap();
    store.put_stream(&key, body(b"prefixed", 3), None).await.unwrap();
    let file = server.dir.path().join(&server.bucket).join("tenant/a/2026/01/blob.bin");
    assert_eq!(std::fs::read(file).unwrap(), b"prefixed");
    let unprefixed = S3BlobStore::new(&server.config(None)).unwrap();
    assert_eq!(unprefixed.size(&key).await.unwrap(), None);
    assert_eq!(unprefixed.size(&StorageKey::parse("tenant/a/2026/01/blob.bin").unwrap()).await.unwrap(), Some(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_refuses_chunks_it_could_not_assemble() {
    let server = S3TestServer::start().await;
    let store = S3BlobStore::new(&server.config(None)).unwrap();
    let key = unique_key("small-parts");
    // Several chunks under the 5 MiB part minimum: refused before any byte is sent.
    let small = store.begin_upload(&key, 3 * 1024 * 1024, 1024 * 1024).await;
    assert!(matches!(small, Err(StorageError::Failed(_))), "{small:?}");
    // One chunk of any size is a single (last) part, which S3 accepts.
    let single = store.begin_upload(&key, 3000, 4096).await.unwrap();
    let receipt = store.put_chunk(&single, 0, body(&content(3000, 2), 1000)).await.unwrap();
    store.complete_upload(&single, &[receipt]).await.unwrap();
    assert_eq!(store.size(&key).await.unwrap(), Some(3000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_wrong_credentials_fail_for_good() {
    let server = S3TestServer::start().await;
    let config = S3Config { secret_key: Secret::new("not-the-secret"), ..server.config(None) };
    let result = S3BlobStore::new(&config).unwrap().check().await;
    assert!(matches!(&result, Err(err @ StorageError::Failed(_)) if !err.is_transient()), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_unreachable_endpoint_is_transient() {
    let server = S3TestServer::start().await;
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = S3Config { endpoint: Some(format!("http://127.0.0.1:{port}")), ..server.config(None) };
    let store = S3BlobStore::new(&config).unwrap();
    let result = store.size(&unique_key("unreachable")).await;
    assert!(matches!(&result, Err(err) if err.is_transient()), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_chunk_body_that_fails_midway_is_a_body_error() {
    let server = S3TestServer::start().await;
    let store = S3BlobStore::new(&server.config(None)).unwrap();
    let key = unique_key("body-error");
    let upload = store.begin_upload(&key, 10_000, 16 * 1024).await.unwrap();
    let failing: ByteStream = Box::pin(futures_util::stream::iter([
        Ok(Bytes::from(content(4000, 3))),
        Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "client went away")),
    ]));
    let result = store.put_chunk(&upload, 0, failing).await;
    assert!(matches!(&result, Err(StorageError::Body(message)) if message.contains("client went away")), "{result:?}");
    store.abort_upload(&upload).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_failed_and_aborted_uploads_leave_no_parts_behind() {
    let server = S3TestServer::start().await;
    let store = S3BlobStore::new(&server.config(None)).unwrap();
    let data = content(2 * STREAM_PART_SIZE + 100, 4);
    let over = store.put_stream(&unique_key("over"), body(&data, 1024 * 1024), Some(data.len() as u64 - 1)).await;
    assert!(matches!(over, Err(StorageError::TooLarge { .. })), "{over:?}");
    let key = unique_key("aborted");
    let upload = store.begin_upload(&key, S3_CHUNK + 10, S3_CHUNK).await.unwrap();
    store.put_chunk(&upload, 1, body(&data[..10], 5)).await.unwrap();
    assert!(!server.multipart_leftovers().is_empty(), "the test server keeps parts where expected");
    store.abort_upload(&upload).await.unwrap();
    assert_eq!(server.multipart_leftovers(), Vec::<String>::new());
}
