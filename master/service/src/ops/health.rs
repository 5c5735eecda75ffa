//! Readiness: whether this master can serve now, for load balancers. Checks the database (a
//! trivial query), the key-value store (a write and a read) and the storage new uploads go to,
//! each within its own short timeout and all at once.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError};
use crate::error_codes as codes;
use crate::{identity::bootstrap, storage::policies};

/// Longest one check may take; a dependency slower than this counts as down.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the probe key lives in the store (it is written on every check).
const PROBE_TTL: Duration = Duration::from_secs(30);

/// The outcome of one check.
#[derive(Debug, Clone)]
pub struct Check {
    pub ok: bool,
    /// How long it took, in milliseconds.
    pub ms: u64,
    /// Why it failed (for the log; the answer only names the check).
    pub failure: Option<String>,
}

/// The outcome of every check.
#[derive(Debug, Clone)]
pub struct Health {
    pub database: Check,
    pub kv: Check,
    pub storage: Check,
}

impl Health {
    /// Each check by its name in the answer.
    pub fn checks(&self) -> [(&'static str, &Check); 3] {
        [("database", &self.database), ("kv", &self.kv), ("storage", &self.storage)]
    }

    /// `Ok` when every check passed; else 503 `site.unhealthy` naming the failed checks (the
    /// causes go to the log: the route is public).
    pub fn verdict(&self) -> Result<(), ServiceError> {
        let failed: Vec<String> = self
            .checks()
            .iter()
            .filter(|(_, check)| !check.ok)
            .map(|(name, check)| {
                tracing::warn!(
                    check = name,
                    failure = check.failure.as_deref().unwrap_or_default(),
                    "readiness check failed"
                );
                let how = match check.failure.as_deref() {
                    Some(TIMED_OUT) => "timed out",
                    _ => "failed",
                };
                format!("{name} ({how})")
            })
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        Err(ServiceError::new(
            ErrorKind::Unavailable,
            codes::SITE_UNHEALTHY,
            format!("not ready: the check of {} did not pass", failed.join(", ")),
        ))
    }
}

const TIMED_OUT: &str = "timed out";

/// Runs every check at once.
pub async fn check(ctx: &Context) -> Health {
    let (database, kv, storage) =
        tokio::join!(timed(database(ctx)), timed(key_value_store(ctx)), timed(default_storage(ctx)));
    Health { database, kv, storage }
}

async fn timed(check: impl Future<Output = Result<(), String>>) -> Check {
    let started = Instant::now();
    let outcome = tokio::time::timeout(CHECK_TIMEOUT, check).await;
    let ms = started.elapsed().as_millis() as u64;
    match outcome {
        Ok(Ok(())) => Check { ok: true, ms, failure: None },
        Ok(Err(why)) => Check { ok: false, ms, failure: Some(why) },
        Err(_) => Check { ok: false, ms, failure: Some(TIMED_OUT.to_owned()) },
    }
}

async fn database(ctx: &Context) -> Result<(), String> {
    ctx.db().ping().await.map_err(|err| err.to_string())
}

/// A write and a read back: a store that answers reads but refuses writes (a replica after a
/// failover) is not ready either.
async fn key_value_store(ctx: &Context) -> Result<(), String> {
    let key = "health:probe";
    let value = uuid::Uuid::new_v4().simple().to_string();
    let store = ctx.store();
    store.set(key, &value, Some(PROBE_TTL)).await.map_err(|err| err.to_string())?;
    match store.get(key).await.map_err(|err| err.to_string())? {
        // Another master may have written its own probe in between: any value proves the read.
        Some(_) => Ok(()),
        None => Err("the probe written was not read back".to_owned()),
    }
}

/// The first policy of the group new users join: where most uploads go. A local root must take
/// a probe file; an S3 bucket must answer a `HEAD`; a storage node must answer.
async fn default_storage(ctx: &Context) -> Result<(), String> {
    let group = bootstrap::registration_group(ctx).await.map_err(|err| err.to_string())?;
    let policies = nubo_model::db::policies::of_group(ctx.db(), group).await.map_err(|err| err.to_string())?;
    let Some(policy) = policies.first() else {
        return Err("the group for new users has no storage policy".to_owned());
    };
    let store = policies::store(ctx, policy).await.map_err(|err| err.to_string())?;
    store.reachable().await.map_err(|err| err.to_string())
}
