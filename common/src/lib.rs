//! What the Nubo master and its storage nodes share: secret values and their loading rules,
//! blake3 content hashing and the blob storage drivers.

pub mod config;
pub mod hash;
pub mod http;
pub mod secret;
pub mod storage;
