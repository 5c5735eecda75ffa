//! The key-value store every piece of short-lived shared state goes through: bans, single-use
//! tokens, challenges, rate-limit counters, caches, locks. Redis when configured, so several
//! masters agree; otherwise an in-process map for the single-machine setup. No module keeps its
//! own map beside it.

pub mod lease;
mod memory;
pub mod metered;
mod redis;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use self::lease::Lease;
pub use self::memory::MemoryStore;
pub use self::redis::{RedisStore, connection_manager};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key-value store unavailable: {0}")]
    Unavailable(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Operations the master needs; each is atomic on its own, in both implementations.
#[async_trait]
pub trait KvStore: Send + Sync + 'static {
    async fn get(&self, key: &str) -> StoreResult<Option<String>>;
    /// Reads several keys in one round trip; answers their values in the same order.
    async fn get_many(&self, keys: &[String]) -> StoreResult<Vec<Option<String>>>;
    /// Sets `key`, replacing any value; `ttl` of `None` keeps it until deleted.
    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> StoreResult<()>;
    /// Sets `key` only when absent; answers whether it was set (claims, single-use tokens, locks).
    async fn set_if_absent(&self, key: &str, value: &str, ttl: Duration) -> StoreResult<bool>;
    /// Removes `key`; answers whether it existed.
    async fn delete(&self, key: &str) -> StoreResult<bool>;
    /// When `key` holds `expected`, replaces it with `replacement` (value and lifetime) or,
    /// for `None`, removes it; otherwise changes nothing. Answers the value `key` held before,
    /// so the caller knows whether the swap happened (WOPI locks: refresh, unlock, relock).
    async fn swap_if(
        &self,
        key: &str,
        expected: &str,
        replacement: Option<(&str, Duration)>,
    ) -> StoreResult<Option<String>>;
    /// Reads and removes `key` in one step (challenges that may be answered once).
    async fn take(&self, key: &str) -> StoreResult<Option<String>>;
    /// Adds one to the counter at `key` and answers the new value; the first increment starts a
    /// window of `window` after which the counter disappears (fixed-window rate limits).
    async fn increment(&self, key: &str, window: Duration) -> StoreResult<u64>;
    /// Counts one attempt on every counter of `budget` (a key and its limit) when each is still
    /// below its limit, and answers true; when one is not, counts nothing and answers false.
    /// Check and count are one step, so concurrent attempts (on every master) never pass a
    /// limit. The first count of a counter starts its window of `window`, as [`increment`] does.
    ///
    /// [`increment`]: KvStore::increment
    async fn charge(&self, budget: &[(String, u64)], window: Duration) -> StoreResult<bool>;
    /// Takes one count back from each counter of `keys` (an attempt that turned out right):
    /// never below zero, never reviving a counter whose window ended, keeping each window.
    async fn refund(&self, keys: &[String]) -> StoreResult<()>;
}

/// The store in use, shared by every service.
pub type SharedStore = Arc<dyn KvStore>;

/// Connects to Redis when a URL is configured, else gives the in-memory store. Keys are
/// prefixed with `prefix`, so several deployments (or test runs) can share one Redis.
pub async fn connect(redis_url: Option<&str>, prefix: &str) -> StoreResult<SharedStore> {
    match redis_url {
        Some(url) => Ok(Arc::new(RedisStore::connect(url, prefix).await?)),
        None => Ok(Arc::new(MemoryStore::new())),
    }
}

#[cfg(test)]
mod tests;
