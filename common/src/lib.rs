//! What the Nubo master and its storage nodes share: secret values and their loading rules,
//! blake3 content hashing, the blob storage drivers, the HTTP edge both listen through, their
//! Prometheus instruments, and image thumbnails.

pub mod config;
pub mod guard;
pub mod hash;
pub mod http;
pub mod metrics;
pub mod secret;
pub mod serve;
pub mod storage;
pub mod thumbnail;
