//! The master <-> storage-node wire model. Methods, envelopes and signing arrive with the
//! storage-node work (issue 6); today it fixes only the protocol version both sides report.

/// Bumped on every incompatible change of the wire model; exchanged in the `Ping` handshake.
pub const PROTOCOL_VERSION: u32 = 1;
