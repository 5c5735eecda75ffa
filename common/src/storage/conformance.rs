//! Behaviour every [`BlobStore`] driver must show, written once and run against each driver
//! (local disk in this crate's tests, S3 and others from `nubo-tests`). Test support only: built
//! for tests and with the `testing` feature.
//!
//! Each check uses keys of its own, so checks may share one store and run in parallel.

use std::any::Any;

use bytes::Bytes;
use futures_util::TryStreamExt;
use futures_util::future::join_all;

use super::{BlobStore, ByteRange, ByteStream, ChunkReceipt, StagedUpload, StorageError, StorageKey};
use crate::hash;

/// A store under test and what it needs.
pub struct Fixture {
    pub store: Box<dyn BlobStore>,
    /// Chunk size for staged uploads: the smallest the backend accepts for several chunks.
    pub chunk_size: u64,
    /// Size of a `put_stream` body that must take the driver's multi-part path (if it has one).
    pub large_stream: usize,
    /// Whatever must outlive the store (a temporary directory, a test server).
    pub keep: Box<dyn Any + Send>,
}

/// Declares one `#[tokio::test]` per conformance check, each building its store with `$setup`
/// (an expression giving a future of [`Fixture`]).
#[macro_export]
macro_rules! blob_store_conformance {
    ($setup:expr) => {
        $crate::blob_store_conformance!(@each $setup;
            chunks_out_of_order_make_the_blob_and_its_blake3,
            chunks_in_parallel_make_the_same_blob,
            a_resent_chunk_replaces_the_first,
            a_chunk_of_the_wrong_length_is_refused,
            a_chunk_index_out_of_range_is_refused,
            completion_needs_every_chunk_exactly_once,
            nothing_is_visible_before_completion,
            completion_never_replaces_a_blob,
            an_aborted_upload_leaves_nothing,
            a_small_stream_is_stored_with_its_hash,
            a_large_stream_is_stored_with_its_hash,
            a_stream_over_its_limit_leaves_nothing,
            ranges_read_exactly_their_bytes,
            a_zero_byte_blob_works_both_ways,
            delete_is_idempotent,
            a_missing_blob_is_not_found,
            the_probe_check_passes,
            listing_shows_completed_blobs_only,
        );
    };
    (@each $setup:expr; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $check() {
            let fixture: $crate::storage::conformance::Fixture = $setup.await;
            $crate::storage::conformance::$check(&fixture).await;
        }
    )*};
}

/// Deterministic bytes that differ between `seed`s and never repeat within a chunk.
pub fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        // xorshift64: fast enough to make tens of MiB in a debug build.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A body delivering `data` in pieces of `piece` bytes, as a network stream would.
pub fn body(data: &[u8], piece: usize) -> ByteStream {
    let pieces: Vec<std::io::Result<Bytes>> =
        data.chunks(piece.max(1)).map(|p| Ok(Bytes::copy_from_slice(p))).collect();
    Box::pin(futures_util::stream::iter(pieces))
}

/// Reads a whole stream (test data only).
pub async fn read_all(stream: ByteStream) -> Vec<u8> {
    let pieces: Vec<Bytes> = stream.try_collect().await.expect("blob stream reads");
    pieces.concat()
}

/// A key of its own for one check, nested to exercise directories.
pub fn unique_key(check: &str) -> StorageKey {
    StorageKey::parse(&format!("conformance/{check}/{}/blob.bin", uuid::Uuid::new_v4().simple())).expect("valid key")
}

async fn get_all(store: &dyn BlobStore, key: &StorageKey, range: Option<ByteRange>) -> Vec<u8> {
    read_all(store.get(key, range).await.expect("get")).await
}

fn chunk_of<'a>(upload: &StagedUpload, data: &'a [u8], index: u32) -> &'a [u8] {
    let start = (u64::from(index) * upload.chunk_size) as usize;
    let end = (start as u64 + upload.chunk_len(index).expect("chunk in range")) as usize;
    &data[start..end]
}

async fn put(store: &dyn BlobStore, upload: &StagedUpload, data: &[u8], index: u32) -> ChunkReceipt {
    let receipt = store.put_chunk(upload, index, body(chunk_of(upload, data, index), 64 * 1024 + 3)).await;
    receipt.unwrap_or_else(|err| panic!("chunk {index}: {err}"))
}

fn combined_hash(upload: &StagedUpload, receipts: &[ChunkReceipt]) -> String {
    let mut sorted = receipts.to_vec();
    sorted.sort_by_key(|r| r.index);
    let values: Vec<String> = sorted.into_iter().map(|r| r.chaining_value).collect();
    hash::combine(&values, upload.chunk_size, upload.size).expect("chunk values combine")
}

/// Two full chunks and a partial one.
fn three_chunks(fixture: &Fixture, seed: u64) -> Vec<u8> {
    let chunk = fixture.chunk_size as usize;
    content(2 * chunk + chunk / 2 + 7, seed)
}

pub async fn chunks_out_of_order_make_the_blob_and_its_blake3(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 1);
    let key = unique_key("out-of-order");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    assert_eq!(upload.total_chunks(), 3);
    let mut receipts = Vec::new();
    for index in [2, 0, 1] {
        receipts.push(put(store, &upload, &data, index).await);
    }
    assert_eq!(combined_hash(&upload, &receipts), hash::hash_hex(&data));
    store.complete_upload(&upload, &receipts).await.expect("complete");
    assert_eq!(store.size(&key).await.unwrap(), Some(data.len() as u64));
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn chunks_in_parallel_make_the_same_blob(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 2);
    let key = unique_key("parallel");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let receipts = join_all((0..3).map(|index| put(store, &upload, &data, index))).await;
    assert_eq!(combined_hash(&upload, &receipts), hash::hash_hex(&data));
    store.complete_upload(&upload, &receipts).await.expect("complete");
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn a_resent_chunk_replaces_the_first(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 3);
    let wrong = content(data.len(), 99);
    let key = unique_key("resent");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let first = put(store, &upload, &wrong, 1).await;
    let mut receipts = vec![put(store, &upload, &data, 0).await, put(store, &upload, &data, 2).await];
    let second = put(store, &upload, &data, 1).await;
    assert_ne!(first.chaining_value, second.chaining_value);
    receipts.push(second);
    assert_eq!(combined_hash(&upload, &receipts), hash::hash_hex(&data));
    store.complete_upload(&upload, &receipts).await.expect("complete");
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn a_chunk_of_the_wrong_length_is_refused(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 4);
    let key = unique_key("wrong-length");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let chunk = chunk_of(&upload, &data, 0);
    let short = store.put_chunk(&upload, 0, body(&chunk[..chunk.len() - 1], 4096)).await;
    assert!(
        matches!(short, Err(StorageError::LengthMismatch { expected, actual }) if expected == fixture.chunk_size && actual == expected - 1),
        "{short:?}"
    );
    let mut longer = chunk.to_vec();
    longer.push(0);
    let long = store.put_chunk(&upload, 0, body(&longer, 4096)).await;
    assert!(
        matches!(long, Err(StorageError::LengthMismatch { expected, .. }) if expected == fixture.chunk_size),
        "{long:?}"
    );
    // The last chunk is shorter than the others and must be exactly that.
    let last = chunk_of(&upload, &data, 2);
    let mut last_longer = last.to_vec();
    last_longer.extend_from_slice(&[1, 2, 3]);
    let long_last = store.put_chunk(&upload, 2, body(&last_longer, 4096)).await;
    assert!(matches!(long_last, Err(StorageError::LengthMismatch { .. })), "{long_last:?}");
    // The upload is still usable with the right bytes.
    let receipts = join_all((0..3).map(|index| put(store, &upload, &data, index))).await;
    store.complete_upload(&upload, &receipts).await.expect("complete");
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn a_chunk_index_out_of_range_is_refused(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 5);
    let key = unique_key("out-of-range");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let result = store.put_chunk(&upload, 3, body(&data[..100], 4096)).await;
    assert!(matches!(result, Err(StorageError::ChunkOutOfRange { index: 3, total: 3 })), "{result:?}");
    store.abort_upload(&upload).await.expect("abort");
}

pub async fn completion_needs_every_chunk_exactly_once(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 6);
    let key = unique_key("incomplete");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let receipts = join_all((0..3).map(|index| put(store, &upload, &data, index))).await;
    let missing = store.complete_upload(&upload, &receipts[..2]).await;
    assert!(missing.is_err(), "completed without chunk 2");
    let twice = [receipts[0].clone(), receipts[0].clone(), receipts[1].clone(), receipts[2].clone()];
    assert!(store.complete_upload(&upload, &twice).await.is_err(), "completed with chunk 0 twice");
    assert_eq!(store.size(&key).await.unwrap(), None);
    store.complete_upload(&upload, &receipts).await.expect("complete");
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn nothing_is_visible_before_completion(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 7);
    let key = unique_key("invisible");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    assert_eq!(store.size(&key).await.unwrap(), None);
    let receipts = join_all((0..3).map(|index| put(store, &upload, &data, index))).await;
    assert_eq!(store.size(&key).await.unwrap(), None);
    assert!(matches!(store.get(&key, None).await.err(), Some(StorageError::NotFound(_))));
    store.complete_upload(&upload, &receipts).await.expect("complete");
    assert_eq!(store.size(&key).await.unwrap(), Some(data.len() as u64));
}

pub async fn completion_never_replaces_a_blob(fixture: &Fixture) {
    let store = &*fixture.store;
    let key = unique_key("no-overwrite");
    let original = content(1000, 8);
    store.put_stream(&key, body(&original, 100), None).await.expect("first blob");
    let data = three_chunks(fixture, 9);
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let receipts = join_all((0..3).map(|index| put(store, &upload, &data, index))).await;
    let result = store.complete_upload(&upload, &receipts).await;
    assert!(matches!(result, Err(StorageError::AlreadyExists(_))), "{result:?}");
    let again = store.put_stream(&key, body(&data[..10], 5), None).await;
    assert!(matches!(again, Err(StorageError::AlreadyExists(_))), "{again:?}");
    assert!(get_all(store, &key, None).await == original, "the first blob changed");
    store.abort_upload(&upload).await.expect("abort");
}

pub async fn an_aborted_upload_leaves_nothing(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = three_chunks(fixture, 10);
    let key = unique_key("abort");
    let upload = store.begin_upload(&key, data.len() as u64, fixture.chunk_size).await.expect("begin");
    let receipts = join_all((0..3).map(|index| put(store, &upload, &data, index))).await;
    store.abort_upload(&upload).await.expect("abort");
    store.abort_upload(&upload).await.expect("abort is idempotent");
    assert!(store.complete_upload(&upload, &receipts).await.is_err(), "completed an aborted upload");
    assert_eq!(store.size(&key).await.unwrap(), None);
}

pub async fn a_small_stream_is_stored_with_its_hash(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = content(100_000, 11);
    let key = unique_key("small-stream");
    let outcome = store.put_stream(&key, body(&data, 7000), Some(100_000)).await.expect("put_stream");
    assert_eq!(outcome.size, 100_000);
    assert_eq!(outcome.blake3, hash::hash_hex(&data));
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn a_large_stream_is_stored_with_its_hash(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = content(fixture.large_stream, 12);
    let key = unique_key("large-stream");
    let outcome = store.put_stream(&key, body(&data, 256 * 1024 + 1), Some(data.len() as u64 + 1)).await;
    let outcome = outcome.expect("put_stream");
    assert_eq!(outcome.size, data.len() as u64);
    assert_eq!(outcome.blake3, hash::hash_hex(&data));
    assert_eq!(store.size(&key).await.unwrap(), Some(data.len() as u64));
    assert!(get_all(store, &key, None).await == data, "content differs");
}

pub async fn a_stream_over_its_limit_leaves_nothing(fixture: &Fixture) {
    let store = &*fixture.store;
    for len in [1000, fixture.large_stream] {
        let data = content(len, 13);
        let key = unique_key("too-large");
        let limit = len as u64 - 1;
        let result = store.put_stream(&key, body(&data, 64 * 1024), Some(limit)).await;
        assert!(matches!(result, Err(StorageError::TooLarge { limit: l }) if l == limit), "{result:?}");
        assert_eq!(store.size(&key).await.unwrap(), None);
    }
}

pub async fn ranges_read_exactly_their_bytes(fixture: &Fixture) {
    let store = &*fixture.store;
    let data = content(300_000, 14);
    let key = unique_key("ranges");
    store.put_stream(&key, body(&data, 50_000), None).await.expect("put_stream");
    let last = data.len() as u64 - 1;
    for (start, end) in [(0, 0), (last, last), (0, last), (1, last - 1), (65_535, 65_536), (100_000, 299_999)] {
        let got = get_all(store, &key, Some(ByteRange { start, end_inclusive: end })).await;
        assert!(got == data[start as usize..=end as usize], "range {start}-{end} differs");
    }
}

pub async fn a_zero_byte_blob_works_both_ways(fixture: &Fixture) {
    let store = &*fixture.store;
    let staged = unique_key("zero-staged");
    let upload = store.begin_upload(&staged, 0, fixture.chunk_size).await.expect("begin");
    assert_eq!(upload.total_chunks(), 0);
    let chunk = store.put_chunk(&upload, 0, body(&[], 1)).await;
    assert!(matches!(chunk, Err(StorageError::ChunkOutOfRange { index: 0, total: 0 })), "{chunk:?}");
    store.complete_upload(&upload, &[]).await.expect("complete");
    assert_eq!(hash::combine(&[], fixture.chunk_size, 0).unwrap(), hash::hash_hex(b""));
    let streamed = unique_key("zero-stream");
    let outcome = store.put_stream(&streamed, body(&[], 1), Some(0)).await.expect("put_stream");
    assert_eq!((outcome.size, outcome.blake3.as_str()), (0, hash::hash_hex(b"").as_str()));
    for key in [&staged, &streamed] {
        assert_eq!(store.size(key).await.unwrap(), Some(0));
        assert!(get_all(store, key, None).await.is_empty());
    }
}

pub async fn delete_is_idempotent(fixture: &Fixture) {
    let store = &*fixture.store;
    let key = unique_key("delete");
    store.put_stream(&key, body(b"bytes to delete", 4), None).await.expect("put_stream");
    store.delete(&key).await.expect("delete");
    assert_eq!(store.size(&key).await.unwrap(), None);
    store.delete(&key).await.expect("second delete");
    store.delete(&unique_key("never-written")).await.expect("delete of a missing blob");
    // The key can be used again afterwards.
    store.put_stream(&key, body(b"again", 4), None).await.expect("put_stream after delete");
    assert!(get_all(store, &key, None).await == b"again");
}

pub async fn a_missing_blob_is_not_found(fixture: &Fixture) {
    let store = &*fixture.store;
    let key = unique_key("missing");
    assert_eq!(store.size(&key).await.unwrap(), None);
    assert!(matches!(store.get(&key, None).await.err(), Some(StorageError::NotFound(_))));
    let range = Some(ByteRange { start: 0, end_inclusive: 9 });
    assert!(matches!(store.get(&key, range).await.err(), Some(StorageError::NotFound(_))));
}

pub async fn the_probe_check_passes(fixture: &Fixture) {
    fixture.store.check().await.expect("check");
}

pub async fn listing_shows_completed_blobs_only(fixture: &Fixture) {
    let store = &fixture.store;
    let done = unique_key("listed");
    store.put_stream(&done, body(b"listed bytes", 4), None).await.unwrap();
    let staged_key = unique_key("staged");
    let staged = store.begin_upload(&staged_key, 2 * fixture.chunk_size, fixture.chunk_size).await.unwrap();
    let listed = store.list().await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|b| b.key.as_str()).collect();
    assert!(keys.contains(&done.as_str()), "{keys:?}");
    assert!(!keys.contains(&staged_key.as_str()), "staged uploads are not blobs: {keys:?}");
    let entry = listed.iter().find(|b| b.key == done.as_str()).unwrap();
    assert!(entry.modified_ms > 1_700_000_000_000, "modification time in ms: {}", entry.modified_ms);
    store.abort_upload(&staged).await.unwrap();
    store.delete(&done).await.unwrap();
    assert!(!store.list().await.unwrap().iter().any(|b| b.key == done.as_str()));
}
