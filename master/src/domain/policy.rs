//! Storage policies as values: their type, options and chunk-size rules.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a policy keeps bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyType {
    /// A directory on the master's disk.
    Local,
    /// An S3-compatible bucket.
    S3,
}

impl PolicyType {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyType::Local => "local",
            PolicyType::S3 => "s3",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "local" => Some(PolicyType::Local),
            "s3" => Some(PolicyType::S3),
            _ => None,
        }
    }
}

/// Options of a `local` policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalOptions {
    /// Directory of the blobs; a relative path is taken inside the master's data directory.
    #[serde(default)]
    pub root: String,
    /// Whether each new blob (and its directory entry) is flushed to disk before the write is
    /// acknowledged (default `true`). With `false` a write is acknowledged from the page cache,
    /// as plain file servers do: faster, but a power cut can lose files acknowledged in the
    /// seconds before it.
    #[serde(default = "durable_by_default")]
    pub durable: bool,
}

fn durable_by_default() -> bool {
    true
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self { root: String::new(), durable: true }
    }
}

/// Options of an `s3` policy. `secret_key` is write-only: the API's views blank it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct S3Options {
    /// Endpoint URL of an S3-compatible service; empty for AWS itself.
    #[serde(default)]
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    /// Path-style addressing (`endpoint/bucket/key`), needed by most self-hosted services.
    #[serde(default)]
    pub path_style: bool,
    pub access_key: String,
    #[serde(default)]
    pub secret_key: String,
    /// Key prefix inside the bucket.
    #[serde(default)]
    pub prefix: String,
}

/// Default chunk size of new policies: 8 MiB (also above S3's 5 MiB minimum part size).
pub const DEFAULT_CHUNK_SIZE: i64 = 8 * 1024 * 1024;

/// Chunks are blake3 subtrees, so their size is a power of two; S3 parts must be >= 5 MiB.
pub fn validate_chunk_size(kind: PolicyType, chunk_size: i64) -> Result<(), String> {
    let min = match kind {
        PolicyType::Local => 64 * 1024,
        PolicyType::S3 => 8 * 1024 * 1024,
    };
    let max = 1024 * 1024 * 1024;
    if chunk_size < min || chunk_size > max || (chunk_size as u64).count_ones() != 1 {
        return Err(format!(
            "chunk_size must be a power of two from {min} to {max} bytes for {} policies",
            kind.as_str()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_powers_of_two_in_range() {
        assert!(validate_chunk_size(PolicyType::Local, 64 * 1024).is_ok());
        assert!(validate_chunk_size(PolicyType::Local, DEFAULT_CHUNK_SIZE).is_ok());
        assert!(validate_chunk_size(PolicyType::Local, 3 * 1024 * 1024).is_err());
        assert!(validate_chunk_size(PolicyType::Local, 1024).is_err());
        assert!(validate_chunk_size(PolicyType::S3, 4 * 1024 * 1024).is_err());
        assert!(validate_chunk_size(PolicyType::S3, 2 * 1024 * 1024 * 1024).is_err());
    }
}
