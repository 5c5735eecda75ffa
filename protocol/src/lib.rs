//! The master <-> storage-node wire model, shared by `nubo-master` and `nubo-slave` and knowing
//! neither: pure types, parsing and HMAC checks, no I/O. Callers bring the HTTP client or server,
//! the clock (`now` in unix seconds) and the replay memory.
//!
//! - [`methods`]: the method table (stable snake_case wire names), the typed [`methods::Call`]
//!   a receiver parses a request into, and each method's params and result.
//! - [`rpc`]: the `Request { id, method, params }` / `Response { id, result | error }` envelopes,
//!   [`rpc::RpcError`] with its stable codes, and the protocol-version check of the handshake.
//! - [`signing`]: HMAC-SHA256 signatures of control-plane requests (the `x-nubo-*` headers) and
//!   their verification: skew window, constant-time MAC check, replay refusal.
//! - [`nonce`]: the replay memory that verification needs ([`nonce::NonceStore`]) and a bounded
//!   in-memory implementation.
//! - [`credential`]: compact, scoped, expiring upload and download credentials the master signs
//!   and a node checks on its own (data plane).
//! - [`key`]: a node's shared key, checked for length once and never printed.
//! - `client` (feature `client`): the signed HTTP caller both sides use, the only I/O here.

#[cfg(feature = "client")]
pub mod client;
pub mod credential;
pub mod key;
pub mod methods;
pub mod nonce;
pub mod rpc;
pub mod signing;

use std::time::{SystemTime, UNIX_EPOCH};

/// Bumped on every incompatible change of the wire model; exchanged in the `Ping` handshake.
/// Compatible additions (a new optional field, a new method announced as a capability) keep it.
pub const PROTOCOL_VERSION: u32 = 1;

/// The two sides of the protocol. Signatures say which side sent a request, so a request one
/// side signed cannot be reflected back to it as if the other side had sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Master,
    Node,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Node => "node",
        }
    }
}

/// Seconds since the Unix epoch by the system clock: the `now` every check here takes, so tests
/// can pass their own. A clock before 1970 reads as 0 (every credential then looks valid for
/// longer, never shorter, and every signature looks stale).
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}
