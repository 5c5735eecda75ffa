//! The Nubo storage node ("slave"): answers the master's signed control-plane calls and serves
//! client-direct chunk uploads and downloads authorised by credentials the master signed.
//!
//! - [`config`]: the one typed configuration (defaults, TOML file, `NUBO_*` env, CLI).
//! - [`error`]: the uniform JSON error body `{code, message}` of the data-plane endpoints.
//! - [`sessions`]: upload sessions and their chunk receipts, persisted as JSON files.
//! - [`rpc`]: `POST /api/v1/slave/rpc`, signature checks and the method handlers.
//! - [`upload`]: `PUT`/`GET /api/v1/slave/upload/...`, chunks sent by clients.
//! - [`download`]: `GET`/`HEAD /api/v1/slave/download/{credential}`, blobs streamed to clients.
//! - [`fetch`]: external downloads, URLs fetched into blobs and reported to the master.
//! - [`guard`]: the SSRF guard of external downloads (addresses, resolver, redirects).
//! - [`instruments`]: `GET /metrics` and the readiness check `GET /api/v1/slave/health`.
//! - [`blob`]: `PUT /api/v1/slave/blob/{credential}`, whole blobs written by the master.
//! - [`report`]: finished uploads reported to the master until it acknowledges.
//! - [`state`]: the node's shared state, read by every handler.
//! - [`server`]: the router and the serve loop.

pub mod blob;
pub mod config;
pub mod download;
pub mod error;
pub mod fetch;
/// The SSRF guard now lives in `nubo_common` (the master fetches WOPI discovery through it too).
pub use nubo_common::guard;
pub mod instruments;
pub mod report;
pub mod rpc;
pub mod server;
pub mod sessions;
pub mod state;
pub mod upload;
