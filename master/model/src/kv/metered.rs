//! A [`KvStore`] that counts the failures of the store it wraps, by operation, for `/metrics`
//! (`nubo_kv_errors_total`); it changes no answer.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nubo_common::metrics::Registry;

use super::{KvStore, SharedStore, StoreResult};

/// Failed key-value store operations, by operation.
pub const KV_ERRORS: &str = "nubo_kv_errors_total";

pub struct MeteredStore {
    inner: SharedStore,
    registry: Arc<Registry>,
}

impl MeteredStore {
    pub fn wrap(inner: SharedStore, registry: Arc<Registry>) -> SharedStore {
        registry.describe(KV_ERRORS, "Key-value store operations that failed (Redis unreachable), by operation.");
        Arc::new(Self { inner, registry })
    }

    fn count<T>(&self, operation: &'static str, result: StoreResult<T>) -> StoreResult<T> {
        if result.is_err() {
            self.registry.counter(KV_ERRORS, &[("operation", operation)]).increment(1);
        }
        result
    }
}

#[async_trait]
impl KvStore for MeteredStore {
    async fn get(&self, key: &str) -> StoreResult<Option<String>> {
        self.count("get", self.inner.get(key).await)
    }

    async fn get_many(&self, keys: &[String]) -> StoreResult<Vec<Option<String>>> {
        self.count("get_many", self.inner.get_many(keys).await)
    }

    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> StoreResult<()> {
        self.count("set", self.inner.set(key, value, ttl).await)
    }

    async fn set_if_absent(&self, key: &str, value: &str, ttl: Duration) -> StoreResult<bool> {
        self.count("set_if_absent", self.inner.set_if_absent(key, value, ttl).await)
    }

    async fn delete(&self, key: &str) -> StoreResult<bool> {
        self.count("delete", self.inner.delete(key).await)
    }

    async fn swap_if(
        &self,
        key: &str,
        expected: &str,
        replacement: Option<(&str, Duration)>,
    ) -> StoreResult<Option<String>> {
        self.count("swap_if", self.inner.swap_if(key, expected, replacement).await)
    }

    async fn take(&self, key: &str) -> StoreResult<Option<String>> {
        self.count("take", self.inner.take(key).await)
    }

    async fn increment(&self, key: &str, window: Duration) -> StoreResult<u64> {
        self.count("increment", self.inner.increment(key, window).await)
    }

    async fn charge(&self, budget: &[(String, u64)], window: Duration) -> StoreResult<bool> {
        self.count("charge", self.inner.charge(budget, window).await)
    }

    async fn refund(&self, keys: &[String]) -> StoreResult<()> {
        self.count("refund", self.inner.refund(keys).await)
    }
}
