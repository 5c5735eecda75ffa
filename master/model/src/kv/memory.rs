//! In-process [`KvStore`]: a map guarded by one mutex, expiring keys lazily on access and in a
//! sweep when the map has grown. Enough for one master; several masters need Redis.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{KvStore, StoreResult};

struct Entry {
    value: String,
    expires: Option<Instant>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|at| at > now)
    }
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Entry>,
    /// Map size at which the next write sweeps expired entries.
    sweep_at: usize,
}

#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self { inner: Mutex::new(Inner { map: HashMap::new(), sweep_at: 1024 }) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Entry>, Instant) -> T) -> T {
        // A poisoned lock only means another thread panicked mid-operation; every operation
        // leaves the map consistent, so keep going.
        let mut inner = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if inner.map.len() >= inner.sweep_at {
            inner.map.retain(|_, entry| entry.live(now));
            inner.sweep_at = (inner.map.len() * 2).max(1024);
        }
        f(&mut inner.map, now)
    }
}

fn live_value(map: &HashMap<String, Entry>, key: &str, now: Instant) -> Option<String> {
    map.get(key).filter(|e| e.live(now)).map(|e| e.value.clone())
}

#[async_trait]
impl KvStore for MemoryStore {
    async fn get(&self, key: &str) -> StoreResult<Option<String>> {
        Ok(self.with(|map, now| live_value(map, key, now)))
    }

    async fn get_many(&self, keys: &[String]) -> StoreResult<Vec<Option<String>>> {
        Ok(self.with(|map, now| keys.iter().map(|key| live_value(map, key, now)).collect()))
    }

    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> StoreResult<()> {
        self.with(|map, now| {
            map.insert(key.to_owned(), Entry { value: value.to_owned(), expires: ttl.map(|t| now + t) });
        });
        Ok(())
    }

    async fn set_if_absent(&self, key: &str, value: &str, ttl: Duration) -> StoreResult<bool> {
        Ok(self.with(|map, now| {
            if live_value(map, key, now).is_some() {
                return false;
            }
            map.insert(key.to_owned(), Entry { value: value.to_owned(), expires: Some(now + ttl) });
            true
        }))
    }

    async fn delete(&self, key: &str) -> StoreResult<bool> {
        Ok(self.with(|map, now| map.remove(key).is_some_and(|e| e.live(now))))
    }

    async fn swap_if(
        &self,
        key: &str,
        expected: &str,
        replacement: Option<(&str, Duration)>,
    ) -> StoreResult<Option<String>> {
        Ok(self.with(|map, now| {
            let before = live_value(map, key, now);
            if before.as_deref() == Some(expected) {
                match replacement {
                    Some((value, ttl)) => {
                        map.insert(key.to_owned(), Entry { value: value.to_owned(), expires: Some(now + ttl) });
                    }
                    None => {
                        map.remove(key);
                    }
                }
            }
            before
        }))
    }

    async fn take(&self, key: &str) -> StoreResult<Option<String>> {
        Ok(self.with(|map, now| map.remove(key).filter(|e| e.live(now)).map(|e| e.value)))
    }

    async fn increment(&self, key: &str, window: Duration) -> StoreResult<u64> {
        Ok(self.with(|map, now| {
            let count = live_value(map, key, now).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + 1;
            let expires = match map.get(key) {
                Some(entry) if entry.live(now) => entry.expires,
                _ => Some(now + window),
            };
            map.insert(key.to_owned(), Entry { value: count.to_string(), expires });
            count
        }))
    }

    async fn charge(&self, budget: &[(String, u64)], window: Duration) -> StoreResult<bool> {
        Ok(self.with(|map, now| {
            let count = |map: &HashMap<String, Entry>, key: &str| {
                live_value(map, key, now).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            };
            if budget.iter().any(|(key, limit)| count(map, key) >= *limit) {
                return false;
            }
            for (key, _) in budget {
                let expires = match map.get(key.as_str()) {
                    Some(entry) if entry.live(now) => entry.expires,
                    _ => Some(now + window),
                };
                let value = (count(map, key) + 1).to_string();
                map.insert(key.clone(), Entry { value, expires });
            }
            true
        }))
    }

    async fn refund(&self, keys: &[String]) -> StoreResult<()> {
        self.with(|map, now| {
            for key in keys {
                if let Some(entry) = map.get_mut(key.as_str()).filter(|e| e.live(now))
                    && let Some(count) = entry.value.parse::<u64>().ok().filter(|c| *c > 0)
                {
                    entry.value = (count - 1).to_string();
                }
            }
        });
        Ok(())
    }
}
