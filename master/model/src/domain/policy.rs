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

impl std::str::FromStr for PolicyType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyType::parse(s).ok_or_else(|| format!("unknown policy type {s:?}"))
    }
}

/// A policy's options, of the policy's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOptions {
    Local(LocalOptions),
    S3(S3Options),
}

impl PolicyOptions {
    /// Reads the stored JSON of a policy of type `kind`.
    pub fn parse(kind: PolicyType, json: &str) -> Result<Self, serde_json::Error> {
        Ok(match kind {
            PolicyType::Local => PolicyOptions::Local(serde_json::from_str(json)?),
            PolicyType::S3 => PolicyOptions::S3(serde_json::from_str(json)?),
        })
    }

    pub fn kind(&self) -> PolicyType {
        match self {
            PolicyOptions::Local(_) => PolicyType::Local,
            PolicyOptions::S3(_) => PolicyType::S3,
        }
    }

    /// The options as stored and shown: a JSON object of the type's fields.
    pub fn to_json(&self) -> serde_json::Value {
        let value = match self {
            PolicyOptions::Local(options) => serde_json::to_value(options),
            PolicyOptions::S3(options) => serde_json::to_value(options),
        };
        value.unwrap_or_default()
    }

    /// The options as stored: JSON text of the type's fields in declaration order.
    pub fn to_text(&self) -> String {
        let text = match self {
            PolicyOptions::Local(options) => serde_json::to_string(options),
            PolicyOptions::S3(options) => serde_json::to_string(options),
        };
        text.unwrap_or_default()
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
    fn options_are_read_as_the_policy_type_says() {
        let local = PolicyOptions::parse(PolicyType::Local, r#"{"root":"uploads"}"#).unwrap();
        assert_eq!(local, PolicyOptions::Local(LocalOptions { root: "uploads".into(), durable: true }));
        assert_eq!(local.kind(), PolicyType::Local);
        assert_eq!(local.to_json(), serde_json::json!({ "root": "uploads", "durable": true }));
        assert!(PolicyOptions::parse(PolicyType::S3, r#"{"root":"uploads"}"#).is_err());
        assert!(PolicyOptions::parse(PolicyType::Local, "not json").is_err());
    }

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
