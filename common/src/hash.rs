//! blake3 content hashes of blobs, including blobs whose chunks are hashed separately (in any
//! order, on any machine) and combined afterwards. Knows nothing about where the bytes live.
//!
//! A chunk of `chunk_size` bytes (a power of two of at least 1 KiB) starting at a multiple of
//! `chunk_size` is always a complete subtree of blake3's tree, so its chaining value can be
//! computed on its own ([`ChunkHasher`]) and the root rebuilt from those values alone
//! ([`combine`]), giving exactly `blake3::hash` of the whole content.

use blake3::hazmat::{self, ChainingValue, HasherExt, Mode};

/// Why a chunk hash could not be computed or combined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    #[error("chunk size {0} is not a power of two of at least 1 KiB")]
    ChunkSize(u64),
    #[error("chunk {index} is out of range (the blob has {total} chunks)")]
    ChunkOutOfRange { index: u32, total: u64 },
    #[error("expected {expected} chunk hashes, got {actual}")]
    ChunkCount { expected: u64, actual: usize },
    #[error("invalid chaining value {0:?}")]
    ChainingValue(String),
    #[error("wrong length: expected {expected} bytes, got {actual}")]
    Length { expected: u64, actual: u64 },
}

/// blake3 of `data`, hex.
pub fn hash_hex(data: &[u8]) -> String {
    blake3::hash(data).to_hex().to_string()
}

/// Whether `chunk_size` can split a blob into blake3 subtrees.
pub fn valid_chunk_size(chunk_size: u64) -> bool {
    chunk_size >= blake3::CHUNK_LEN as u64 && chunk_size.is_power_of_two()
}

/// Number of chunks of a blob of `total_size` bytes: 0 for the empty blob.
pub fn chunk_count(chunk_size: u64, total_size: u64) -> u64 {
    total_size.div_ceil(chunk_size)
}

/// Hashes one chunk of a blob as a blake3 subtree at its offset.
pub struct ChunkHasher {
    hasher: blake3::Hasher,
    /// The whole blob is this one chunk: its hash is the root hash, not a chaining value.
    whole: bool,
    expected: u64,
    received: u64,
}

impl ChunkHasher {
    /// Prepares to hash chunk `index` of a blob of `total_size` bytes cut in `chunk_size` chunks.
    pub fn new(index: u32, chunk_size: u64, total_size: u64) -> Result<Self, HashError> {
        if !valid_chunk_size(chunk_size) {
            return Err(HashError::ChunkSize(chunk_size));
        }
        let total = chunk_count(chunk_size, total_size);
        if u64::from(index) >= total {
            return Err(HashError::ChunkOutOfRange { index, total });
        }
        let offset = u64::from(index) * chunk_size;
        let mut hasher = blake3::Hasher::new();
        let whole = total == 1;
        if !whole {
            hasher.set_input_offset(offset);
        }
        let expected = chunk_size.min(total_size - offset);
        Ok(Self { hasher, whole, expected, received: 0 })
    }

    /// Exact length the chunk must have.
    pub fn expected_len(&self) -> u64 {
        self.expected
    }

    /// Bytes seen so far, including any beyond the expected length.
    pub fn received(&self) -> u64 {
        self.received
    }

    pub fn update(&mut self, data: &[u8]) {
        // Bytes past the chunk's end would make blake3 merge the wrong subtrees (and panic); they
        // are only counted, so `finalize` reports the mismatch instead.
        let room = self.expected.saturating_sub(self.received);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(data.len());
        self.hasher.update(&data[..take]);
        self.received += data.len() as u64;
    }

    /// The chunk's chaining value in hex, or the root hash when the blob is this one chunk.
    pub fn finalize(&self) -> Result<String, HashError> {
        if self.received != self.expected {
            return Err(HashError::Length { expected: self.expected, actual: self.received });
        }
        Ok(if self.whole {
            self.hasher.finalize().to_hex().to_string()
        } else {
            cv_to_hex(&self.hasher.finalize_non_root())
        })
    }
}

/// Merges the chunk values from [`ChunkHasher::finalize`] (in index order) into the blob's root
/// hash, hex: the same value as `blake3::hash` of the whole content.
pub fn combine(chaining_values_hex: &[String], chunk_size: u64, total_size: u64) -> Result<String, HashError> {
    if !valid_chunk_size(chunk_size) {
        return Err(HashError::ChunkSize(chunk_size));
    }
    let expected = chunk_count(chunk_size, total_size);
    if chaining_values_hex.len() as u64 != expected {
        return Err(HashError::ChunkCount { expected, actual: chaining_values_hex.len() });
    }
    let values = chaining_values_hex.iter().map(|hex| cv_from_hex(hex)).collect::<Result<Vec<_>, _>>()?;
    Ok(match values.as_slice() {
        [] => hash_hex(b""),
        // A single chunk was hashed as the root already.
        [root] => cv_to_hex(root),
        _ => {
            let left_len = hazmat::left_subtree_len(total_size);
            let left = merge(&values, chunk_size, 0, left_len);
            let right = merge(&values, chunk_size, left_len, total_size - left_len);
            hazmat::merge_subtrees_root(&left, &right, Mode::Hash).to_hex().to_string()
        }
    })
}

/// Chaining value of the non-root subtree covering `len` bytes from `offset`, which starts on a
/// chunk boundary. blake3 splits a span of more than one 1 KiB chunk so that the left side is the
/// largest power of two of chunks smaller than the span; with power-of-two chunks those splits
/// always fall on our chunk boundaries.
fn merge(values: &[ChainingValue], chunk_size: u64, offset: u64, len: u64) -> ChainingValue {
    if len <= chunk_size {
        return values[(offset / chunk_size) as usize];
    }
    let left_len = hazmat::left_subtree_len(len);
    let left = merge(values, chunk_size, offset, left_len);
    let right = merge(values, chunk_size, offset + left_len, len - left_len);
    hazmat::merge_subtrees_non_root(&left, &right, Mode::Hash)
}

fn cv_to_hex(value: &ChainingValue) -> String {
    blake3::Hash::from_bytes(*value).to_hex().to_string()
}

fn cv_from_hex(hex: &str) -> Result<ChainingValue, HashError> {
    blake3::Hash::from_hex(hex).map(|hash| *hash.as_bytes()).map_err(|_| HashError::ChainingValue(hex.to_owned()))
}

/// Hashes a whole blob written as one stream, counting its bytes.
#[derive(Default)]
pub struct StreamHasher {
    hasher: blake3::Hasher,
    len: u64,
}

impl StreamHasher {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
        self.len += data.len() as u64;
    }

    /// Bytes hashed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// blake3 of everything hashed, hex.
    pub fn finalize(&self) -> String {
        self.hasher.finalize().to_hex().to_string()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Hashes `content` chunk by chunk, in reverse order to show order does not matter.
    fn chunked(content: &[u8], chunk_size: u64) -> Vec<String> {
        let total = content.len() as u64;
        let mut values = vec![String::new(); chunk_count(chunk_size, total) as usize];
        for (index, value) in values.iter_mut().enumerate().rev() {
            let mut hasher = ChunkHasher::new(index as u32, chunk_size, total).unwrap();
            let start = index * chunk_size as usize;
            let end = (start + chunk_size as usize).min(content.len());
            // Several updates of odd sizes, as a network stream delivers them.
            for piece in content[start..end].chunks(777) {
                hasher.update(piece);
            }
            *value = hasher.finalize().unwrap();
        }
        values
    }

    fn content_of(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8).collect()
    }

    #[test]
    fn empty_blob_has_no_chunks_and_hashes_as_empty_input() {
        assert_eq!(combine(&[], 1024, 0).unwrap(), hash_hex(b""));
        assert!(ChunkHasher::new(0, 1024, 0).is_err());
    }

    #[test]
    fn single_chunk_value_is_the_root_hash() {
        for len in [1, 1023, 1024, 4096] {
            let content = content_of(len, 7);
            let values = chunked(&content, 4096);
            assert_eq!(values, vec![hash_hex(&content)]);
            assert_eq!(combine(&values, 4096, len as u64).unwrap(), hash_hex(&content));
        }
    }

    #[test]
    fn fixed_sizes_at_the_edges_combine_to_blake3() {
        for chunk_size in [1024u64, 2048, 8192] {
            let c = chunk_size as usize;
            for len in [c + 1, 2 * c - 1, 2 * c, 2 * c + 1, 3 * c, 5 * c + 17, 8 * c, 8 * c + 1, 13 * c - 1] {
                let content = content_of(len, 3);
                let values = chunked(&content, chunk_size);
                assert_eq!(combine(&values, chunk_size, len as u64).unwrap(), hash_hex(&content), "{chunk_size} {len}");
            }
        }
    }

    #[test]
    fn wrong_inputs_are_refused() {
        assert_eq!(ChunkHasher::new(0, 1000, 5000).err(), Some(HashError::ChunkSize(1000)));
        assert_eq!(ChunkHasher::new(0, 512, 5000).err(), Some(HashError::ChunkSize(512)));
        assert_eq!(ChunkHasher::new(3, 1024, 3072).err(), Some(HashError::ChunkOutOfRange { index: 3, total: 3 }));
        assert!(matches!(combine(&["00".repeat(32)], 1024, 2048), Err(HashError::ChunkCount { .. })));
        assert!(matches!(combine(&["zz".into(), "00".repeat(32)], 1024, 2048), Err(HashError::ChainingValue(_))));
    }

    #[test]
    fn wrong_chunk_length_is_reported_not_hashed() {
        let mut short = ChunkHasher::new(1, 1024, 4096).unwrap();
        short.update(&[0; 1000]);
        assert_eq!(short.finalize(), Err(HashError::Length { expected: 1024, actual: 1000 }));
        // Too many bytes must not panic inside blake3 (a subtree at offset 1 KiB holds 1 KiB).
        let mut long = ChunkHasher::new(1, 1024, 4096).unwrap();
        long.update(&[0; 1500]);
        long.update(&[0; 10]);
        assert_eq!(long.received(), 1510);
        assert_eq!(long.finalize(), Err(HashError::Length { expected: 1024, actual: 1510 }));
    }

    #[test]
    fn stream_hasher_matches_one_shot_hash() {
        let content = content_of(100_000, 1);
        let mut hasher = StreamHasher::new();
        for piece in content.chunks(4099) {
            hasher.update(piece);
        }
        assert_eq!(hasher.len(), 100_000);
        assert_eq!(hasher.finalize(), hash_hex(&content));
    }

    /// Sizes around chunk multiples, where subtree shapes change.
    fn size_near_multiple() -> impl Strategy<Value = (u64, usize)> {
        (0u32..=6, 0usize..40, -2i64..=2).prop_map(|(shift, chunks, delta)| {
            let chunk_size = 1024u64 << shift;
            let len = (chunks as i64 * chunk_size as i64 + delta).max(0) as usize;
            (chunk_size, len)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn combined_chunks_equal_blake3_of_the_content(shift in 0u32..=6, len in 0usize..300_000, seed: u8) {
            let chunk_size = 1024u64 << shift;
            let content = content_of(len, seed);
            let values = chunked(&content, chunk_size);
            prop_assert_eq!(combine(&values, chunk_size, len as u64).unwrap(), hash_hex(&content));
        }

        #[test]
        fn combined_chunks_equal_blake3_near_chunk_multiples((chunk_size, len) in size_near_multiple(), seed: u8) {
            let content = content_of(len, seed);
            let values = chunked(&content, chunk_size);
            prop_assert_eq!(combine(&values, chunk_size, len as u64).unwrap(), hash_hex(&content));
        }
    }
}
