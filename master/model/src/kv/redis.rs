//! Redis-backed [`KvStore`], shared by every master of a deployment. Uses a multiplexed
//! connection manager that reconnects by itself.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionManager;

use super::{KvStore, StoreError, StoreResult};

pub struct RedisStore {
    connection: ConnectionManager,
    prefix: String,
}

impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> Self {
        StoreError::Unavailable(err.to_string())
    }
}

/// Milliseconds for PX/PEXPIRE, never 0 (Redis refuses a zero expiry).
fn millis(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

/// A connection manager that fails fast while Redis is away, so a request answers
/// `store.unavailable` at once instead of waiting out the reconnection: one retry half a second
/// later, a second to connect, two to answer (no command here blocks). The default retries six
/// times with delays growing to a minute, during which every request waits; a request that
/// fails has the manager reconnect, so the first request after Redis is back reconnects.
pub async fn connection_manager(client: redis::Client) -> redis::RedisResult<ConnectionManager> {
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_max_delay(500)
        .set_connection_timeout(Duration::from_secs(1))
        .set_response_timeout(Duration::from_secs(2));
    ConnectionManager::new_with_config(client, config).await
}

impl RedisStore {
    pub async fn connect(url: &str, prefix: &str) -> StoreResult<Self> {
        let client = redis::Client::open(url)?;
        let connection = connection_manager(client).await?;
        Ok(Self { connection, prefix: prefix.to_owned() })
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

#[async_trait]
impl KvStore for RedisStore {
    async fn get(&self, key: &str) -> StoreResult<Option<String>> {
        let mut conn = self.connection.clone();
        Ok(redis::cmd("GET").arg(self.key(key)).query_async(&mut conn).await?)
    }

    async fn get_many(&self, keys: &[String]) -> StoreResult<Vec<Option<String>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.connection.clone();
        let mut cmd = redis::cmd("MGET");
        for key in keys {
            cmd.arg(self.key(key));
        }
        Ok(cmd.query_async(&mut conn).await?)
    }

    async fn set(&self, key: &str, value: &str, ttl: Option<Duration>) -> StoreResult<()> {
        let mut conn = self.connection.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(key)).arg(value);
        if let Some(ttl) = ttl {
            cmd.arg("PX").arg(millis(ttl));
        }
        cmd.query_async::<()>(&mut conn).await?;
        Ok(())
    }

    async fn set_if_absent(&self, key: &str, value: &str, ttl: Duration) -> StoreResult<bool> {
        let mut conn = self.connection.clone();
        let reply: Option<String> = redis::cmd("SET")
            .arg(self.key(key))
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .query_async(&mut conn)
            .await?;
        Ok(reply.is_some())
    }

    async fn delete(&self, key: &str) -> StoreResult<bool> {
        let mut conn = self.connection.clone();
        let removed: u64 = redis::cmd("DEL").arg(self.key(key)).query_async(&mut conn).await?;
        Ok(removed > 0)
    }

    async fn swap_if(
        &self,
        key: &str,
        expected: &str,
        replacement: Option<(&str, Duration)>,
    ) -> StoreResult<Option<String>> {
        // Compare and change in one script, so two masters never both win.
        let script = redis::Script::new(
            "local v = redis.call('GET', KEYS[1]) \
             if v == ARGV[1] then \
               if ARGV[2] == 'set' then redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4]) \
               else redis.call('DEL', KEYS[1]) end \
             end \
             return v",
        );
        let (mode, value, ttl) = match replacement {
            Some((value, ttl)) => ("set", value, millis(ttl)),
            None => ("delete", "", 1),
        };
        let mut conn = self.connection.clone();
        let before: Option<String> =
            script.key(self.key(key)).arg(expected).arg(mode).arg(value).arg(ttl).invoke_async(&mut conn).await?;
        Ok(before)
    }

    async fn take(&self, key: &str) -> StoreResult<Option<String>> {
        let mut conn = self.connection.clone();
        Ok(redis::cmd("GETDEL").arg(self.key(key)).query_async(&mut conn).await?)
    }

    async fn increment(&self, key: &str, window: Duration) -> StoreResult<u64> {
        // INCR and the first PEXPIRE must happen together, or a crash in between leaves a
        // counter that never expires.
        let script = redis::Script::new(
            "local n = redis.call('INCR', KEYS[1]) \
             if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end \
             return n",
        );
        let mut conn = self.connection.clone();
        let count: u64 = script.key(self.key(key)).arg(millis(window)).invoke_async(&mut conn).await?;
        Ok(count)
    }

    async fn charge(&self, budget: &[(String, u64)], window: Duration) -> StoreResult<bool> {
        if budget.is_empty() {
            return Ok(true);
        }
        // Every check before any count, in one script: two masters never both pass a limit.
        let script = redis::Script::new(
            "for i, key in ipairs(KEYS) do \
               if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i + 1]) then return 0 end \
             end \
             for _, key in ipairs(KEYS) do \
               if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, ARGV[1]) end \
             end \
             return 1",
        );
        let mut invocation = script.prepare_invoke();
        invocation.arg(millis(window));
        for (key, limit) in budget {
            invocation.key(self.key(key)).arg(*limit);
        }
        let mut conn = self.connection.clone();
        let charged: u64 = invocation.invoke_async(&mut conn).await?;
        Ok(charged == 1)
    }

    async fn refund(&self, keys: &[String]) -> StoreResult<()> {
        if keys.is_empty() {
            return Ok(());
        }
        // DECR keeps the key's lifetime; a counter whose window ended stays gone.
        let script = redis::Script::new(
            "for _, key in ipairs(KEYS) do \
               if tonumber(redis.call('GET', key) or '0') > 0 then redis.call('DECR', key) end \
             end \
             return 0",
        );
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(self.key(key));
        }
        let mut conn = self.connection.clone();
        invocation.invoke_async::<()>(&mut conn).await?;
        Ok(())
    }
}
