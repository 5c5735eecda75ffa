//! Replay memory for request signatures: the [`NonceStore`] trait that master and node implement
//! over their key-value stores (Redis when several masters share the work), and a bounded
//! in-memory implementation for tests and single-process use. Verification itself is `signing`'s.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

/// Why the replay memory could not answer. Verification then fails closed: a request whose
/// nonce cannot be recorded is refused, never let through unchecked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NonceStoreError {
    #[error("nonce store unavailable: {0}")]
    Unavailable(String),
    #[error("nonce store is full ({capacity} live nonces)")]
    Full { capacity: usize },
}

/// Remembers which nonces each node already used.
#[async_trait]
pub trait NonceStore: Send + Sync {
    /// Records `nonce` of `node` for `ttl`, atomically: answers true the first time, false while
    /// it is still remembered (a replay). A Redis implementation is one `SET key 1 NX EX ttl`.
    async fn remember(&self, node: &str, nonce: &str, ttl: Duration) -> Result<bool, NonceStoreError>;
}

/// Longest the in-memory store keeps a nonce, whatever `ttl` asks: far beyond any sane skew
/// window, and it keeps `Instant` arithmetic clear of overflow.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

type Clock = Box<dyn Fn() -> Instant + Send + Sync>;
type Key = (String, String);

/// In-process [`NonceStore`]: a map from (node, nonce) to expiry, plus a min-heap of expiries so
/// each call drops what has lapsed in O(log n). At most `capacity` live nonces: beyond that it
/// refuses (`Full`) rather than forget a live nonce, which would reopen the replay window.
pub struct MemoryNonceStore {
    inner: Mutex<Inner>,
    capacity: usize,
    clock: Clock,
}

#[derive(Default)]
struct Inner {
    expires: HashMap<Key, Instant>,
    queue: BinaryHeap<Reverse<(Instant, Key)>>,
}

impl Inner {
    fn purge(&mut self, now: Instant) {
        while let Some(Reverse((at, _))) = self.queue.peek()
            && *at <= now
        {
            let Some(Reverse((at, key))) = self.queue.pop() else { break };
            // The map holds the truth; a queued expiry removes an entry only if it is still
            // that entry's expiry.
            if self.expires.get(&key) == Some(&at) {
                self.expires.remove(&key);
            }
        }
    }
}

impl MemoryNonceStore {
    /// Room for 100 000 live nonces: over 800 signed requests a second with the default 60 s
    /// skew window (nonces live up to two windows).
    pub const DEFAULT_CAPACITY: usize = 100_000;

    pub fn new() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_clock(capacity, Instant::now)
    }

    /// A store reading time from `clock`, so tests can move time forward without sleeping.
    pub fn with_clock(capacity: usize, clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        Self { inner: Mutex::new(Inner::default()), capacity, clock: Box::new(clock) }
    }

    /// Nonces currently remembered.
    pub fn len(&self) -> usize {
        let now = (self.clock)();
        let mut inner = self.lock();
        inner.purge(now);
        inner.expires.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked between two statements that each
        // leave the maps consistent; keep going rather than fail every later request.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Default for MemoryNonceStore {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl NonceStore for MemoryNonceStore {
    async fn remember(&self, node: &str, nonce: &str, ttl: Duration) -> Result<bool, NonceStoreError> {
        let now = (self.clock)();
        let mut inner = self.lock();
        inner.purge(now);
        let key = (node.to_owned(), nonce.to_owned());
        if inner.expires.contains_key(&key) {
            return Ok(false);
        }
        if inner.expires.len() >= self.capacity {
            return Err(NonceStoreError::Full { capacity: self.capacity });
        }
        let at = now.checked_add(ttl.min(MAX_TTL)).unwrap_or(now);
        if at > now {
            inner.queue.push(Reverse((at, key.clone())));
            inner.expires.insert(key, at);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A clock the test moves by hand.
    fn manual_clock() -> (Arc<Mutex<Instant>>, impl Fn() -> Instant + Send + Sync + 'static) {
        let time = Arc::new(Mutex::new(Instant::now()));
        let read = Arc::clone(&time);
        (time, move || *read.lock().unwrap())
    }

    fn advance(time: &Mutex<Instant>, by: Duration) {
        let mut now = time.lock().unwrap();
        *now += by;
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_nonce_is_new_once_then_a_replay() {
        let store = MemoryNonceStore::new();
        assert_eq!(store.remember("n1", "abc", MINUTE).await, Ok(true));
        assert_eq!(store.remember("n1", "abc", MINUTE).await, Ok(false));
        assert_eq!(store.len(), 1);
    }

    #[tokio::test]
    async fn nodes_have_separate_nonce_spaces() {
        let store = MemoryNonceStore::new();
        assert_eq!(store.remember("n1", "abc", MINUTE).await, Ok(true));
        assert_eq!(store.remember("n2", "abc", MINUTE).await, Ok(true));
        // The pair is the key: no concatenation can make two pairs collide.
        assert_eq!(store.remember("n1a", "bc", MINUTE).await, Ok(true));
    }

    #[tokio::test]
    async fn a_nonce_is_forgotten_when_its_ttl_lapses() {
        let (time, clock) = manual_clock();
        let store = MemoryNonceStore::with_clock(10, clock);
        assert_eq!(store.remember("n1", "abc", MINUTE).await, Ok(true));
        advance(&time, MINUTE - Duration::from_millis(1));
        assert_eq!(store.remember("n1", "abc", MINUTE).await, Ok(false));
        advance(&time, Duration::from_millis(1));
        assert!(store.is_empty());
        assert_eq!(store.remember("n1", "abc", MINUTE).await, Ok(true));
    }

    #[tokio::test]
    async fn a_full_store_refuses_until_entries_lapse() {
        let (time, clock) = manual_clock();
        let store = MemoryNonceStore::with_clock(2, clock);
        assert_eq!(store.remember("n", "a", MINUTE).await, Ok(true));
        assert_eq!(store.remember("n", "b", 2 * MINUTE).await, Ok(true));
        assert_eq!(store.remember("n", "c", MINUTE).await, Err(NonceStoreError::Full { capacity: 2 }));
        // A replay is still recognised as such when full.
        assert_eq!(store.remember("n", "a", MINUTE).await, Ok(false));
        advance(&time, MINUTE);
        assert_eq!(store.remember("n", "c", MINUTE).await, Ok(true));
        assert_eq!(store.len(), 2);
    }

    #[tokio::test]
    async fn a_zero_ttl_is_remembered_for_no_time_and_huge_ttls_do_not_overflow() {
        let store = MemoryNonceStore::new();
        assert_eq!(store.remember("n", "a", Duration::ZERO).await, Ok(true));
        assert!(store.is_empty());
        assert_eq!(store.remember("n", "b", Duration::MAX).await, Ok(true));
        assert_eq!(store.remember("n", "b", Duration::MAX).await, Ok(false));
    }
}
