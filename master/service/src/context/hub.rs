//! The fan-out of change events a master holds for its subscribers (the use cases that fill
//! and read it are `tree::events`).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use nubo_model::db::events::EventRow;
use tokio::sync::{Notify, broadcast};

/// Live events a slow subscriber may fall behind by before it re-reads them from the table.
const FANOUT_CAPACITY: usize = 4096;

/// A master's fan-out of change events.
pub struct EventHub {
    pub(crate) fanout: broadcast::Sender<Arc<EventRow>>,
    /// Every event up to this cursor has been delivered (or skipped as rolled back).
    pub(crate) delivered: AtomicI64,
    pub(crate) poked: Notify,
    /// Where pokes go to reach the other masters (set once Redis is connected).
    publisher: std::sync::OnceLock<redis::aio::ConnectionManager>,
    pub(crate) channel: String,
}

impl EventHub {
    /// A hub whose pokes go to the Redis channel `channel` once [`EventHub::publish_to`] is called.
    pub fn new(channel: String) -> Self {
        let (fanout, _) = broadcast::channel(FANOUT_CAPACITY);
        Self {
            fanout,
            delivered: AtomicI64::new(0),
            poked: Notify::new(),
            publisher: std::sync::OnceLock::new(),
            channel,
        }
    }

    /// Sends pokes through this Redis connection from now on.
    pub fn publish_to(&self, connection: redis::aio::ConnectionManager) {
        let _ = self.publisher.set(connection);
    }

    /// Wakes this master's hub and, through Redis, every other master's (after a write).
    pub fn poke(&self) {
        self.poked.notify_one();
        if let Some(connection) = self.publisher.get() {
            let (mut connection, channel) = (connection.clone(), self.channel.clone());
            tokio::spawn(async move {
                let sent: redis::RedisResult<i64> =
                    redis::cmd("PUBLISH").arg(&channel).arg("1").query_async(&mut connection).await;
                if let Err(error) = sent {
                    tracing::debug!(%error, "could not publish a change poke; the other masters poll");
                }
            });
        }
    }

    pub fn delivered(&self) -> i64 {
        self.delivered.load(Ordering::Acquire)
    }
}

/// Connects the hub's Redis publisher when Redis is configured (a failure leaves the masters
/// polling each other's writes once a second).
pub async fn connect_publisher(redis_url: Option<&str>) -> Option<redis::aio::ConnectionManager> {
    let client = redis::Client::open(redis_url?).ok()?;
    match nubo_model::kv::connection_manager(client).await {
        Ok(connection) => Some(connection),
        Err(error) => {
            tracing::warn!(%error, "no Redis connection for change pokes; masters see each other's changes within a second");
            None
        }
    }
}
