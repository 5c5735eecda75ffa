//! A storage node's shared key: the one secret the master and that node both hold, keyed once
//! into HMAC-SHA256 for request signatures and data-plane credentials. It never prints, and the
//! MAC primitives stay crate-private so every use goes through a domain-separated format.

use std::fmt;

use hmac::{Hmac, Mac};
use nubo_common::secret::Secret;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Fewest bytes a node key may have: 256 bits, the strength of the MAC itself.
pub const MIN_KEY_LEN: usize = 32;

/// A key too short to be trusted; the number is its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a node key needs at least {MIN_KEY_LEN} bytes, got {0}")]
pub struct WeakKey(pub usize);

/// A node's key. The secret's UTF-8 bytes are the HMAC key as they are (a base64 string from
/// the configuration is not decoded), so both sides only need to agree on the text.
#[derive(Clone)]
pub struct NodeKey {
    // Keyed once: each use clones the prepared state instead of hashing the key again.
    mac: HmacSha256,
}

impl NodeKey {
    pub fn new(secret: &Secret) -> Result<Self, WeakKey> {
        let bytes = secret.expose().as_bytes();
        if bytes.len() < MIN_KEY_LEN {
            return Err(WeakKey(bytes.len()));
        }
        // HMAC takes keys of any length; the error branch exists only in the trait's signature.
        let mac = HmacSha256::new_from_slice(bytes).map_err(|_| WeakKey(bytes.len()))?;
        Ok(Self { mac })
    }

    /// HMAC-SHA256 over the concatenation of `parts`.
    pub(crate) fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        self.over(parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of the concatenation of `parts`, compared in constant time.
    pub(crate) fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.over(parts).verify_slice(tag).is_ok()
    }

    fn over(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }
}

impl fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeKey(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_are_refused() {
        assert_eq!(NodeKey::new(&Secret::new("x".repeat(31))).unwrap_err(), WeakKey(31));
        assert!(NodeKey::new(&Secret::new("x".repeat(32))).is_ok());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = NodeKey::new(&Secret::new("k".repeat(40))).unwrap();
        assert_eq!(format!("{key:?}"), "NodeKey(***)");
    }

    #[test]
    fn tag_verifies_and_depends_on_key_and_every_byte() {
        let key = NodeKey::new(&Secret::new("a".repeat(32))).unwrap();
        let other = NodeKey::new(&Secret::new("b".repeat(32))).unwrap();
        let tag = key.tag(&[b"hello ", b"world"]);
        // Split points do not matter, only the concatenation does: callers add separators.
        assert!(key.verify(&[b"hello world"], &tag));
        assert!(!key.verify(&[b"hello worle"], &tag));
        assert!(!other.verify(&[b"hello world"], &tag));
        assert!(!key.verify(&[b"hello world"], &tag[..31]));
    }
}
