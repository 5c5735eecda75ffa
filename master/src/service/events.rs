//! Change events for sync clients (`GET /events`): each master's hub reads the events the
//! database triggers wrote (every master's writes land in the same table) and fans them out to
//! its subscribers; a write request pokes every master's hub at once (through Redis pub/sub when
//! configured, in-process otherwise), and a poll every second catches writes of background jobs.
//! Subscribers replay what they missed from the table, up to the cursor the hub has delivered,
//! so replay and live delivery meet without a gap or a repeat.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::{Notify, broadcast};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::db::{self, events::EventRow};
use crate::domain::ids::UserId;
use crate::domain::time::{Millis, now_ms, to_rfc3339};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// Events read per query.
const BATCH: i64 = 1000;
/// The hub looks at the table at least this often (jobs' writes poke nobody).
const POLL_EVERY: Duration = Duration::from_secs(1);
/// A cursor missing from the sequence is a transaction still running (PostgreSQL hands out
/// cursors before commit) for this long; after that it rolled back and is skipped.
const GAP_PATIENCE: Duration = Duration::from_secs(3);
/// Live events a slow subscriber may fall behind by before it re-reads them from the table.
const FANOUT_CAPACITY: usize = 4096;

/// One change of a user's tree.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChangeEvent {
    /// The cursor: resume with `GET /events?since=` this value.
    pub cursor: i64,
    /// `created`, `modified`, `moved`, `renamed`, `trashed`, `restored` or `deleted`.
    pub kind: String,
    pub object_id: Uuid,
    /// `file` or `folder`.
    pub object_kind: String,
    /// The folder it is in after the change (for `deleted`: was in).
    pub parent_id: Option<Uuid>,
    /// Its name after the change.
    pub name: String,
    pub at: String,
}

/// One event of the `GET /events` stream as it travels (Server-Sent Events): `event` is `ready`
/// (first; `data` is `{"cursor": n, "head": h, "epoch": e}`, the cursor the stream starts from,
/// that of the subscriber's newest change delivered when it started, and the server's epoch),
/// `change` (`data` is a
/// `ChangeEvent` in JSON, `id` its cursor) or `error` (the stream ends; `data` says why).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StreamEvent {
    pub event: String,
    /// JSON text: `{"cursor": n, "head": h, "epoch": e}` for `ready`, a `ChangeEvent` for `change`.
    pub data: String,
    /// The cursor of a `change` event.
    pub id: Option<String>,
}

impl From<&EventRow> for ChangeEvent {
    fn from(row: &EventRow) -> Self {
        ChangeEvent {
            cursor: row.seq,
            kind: row.kind.clone(),
            object_id: row.object_id.into(),
            object_kind: row.object_kind.clone(),
            parent_id: row.parent_id.map(Into::into),
            name: row.name.clone(),
            at: to_rfc3339(row.at),
        }
    }
}

/// A master's fan-out of change events.
pub struct EventHub {
    fanout: broadcast::Sender<Arc<EventRow>>,
    /// Every event up to this cursor has been delivered (or skipped as rolled back).
    delivered: AtomicI64,
    poked: Notify,
    /// Where pokes go to reach the other masters (set once Redis is connected).
    publisher: std::sync::OnceLock<redis::aio::ConnectionManager>,
    channel: String,
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
    match crate::kv::connection_manager(client).await {
        Ok(connection) => Some(connection),
        Err(error) => {
            tracing::warn!(%error, "no Redis connection for change pokes; masters see each other's changes within a second");
            None
        }
    }
}

/// Starts the hub's reader, and its Redis subscriber when Redis is configured.
pub fn start(ctx: &Context, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
    let mut handles = vec![tokio::spawn(read_loop(ctx.clone(), shutdown.clone()))];
    if let Some(url) = ctx.config().redis_url.clone() {
        handles.push(tokio::spawn(listen_for_pokes(ctx.clone(), url, shutdown.clone())));
    }
    handles
}

async fn read_loop(ctx: Context, shutdown: CancellationToken) {
    let hub = ctx.events();
    // New subscribers start from now: the events before this master started are history.
    let mut cursor = loop {
        match db::events::latest(ctx.db()).await {
            Ok(latest) => break latest,
            Err(error) => {
                tracing::warn!(%error, "cannot read the change events; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(POLL_EVERY) => {}
                }
            }
        }
    };
    hub.delivered.store(cursor, Ordering::Release);
    let mut gap_seen: Option<(i64, Instant)> = None;
    loop {
        match db::events::after(ctx.db(), cursor, BATCH).await {
            Ok(rows) => {
                let full = rows.len() as i64 == BATCH;
                for row in rows {
                    if row.seq != cursor + 1 {
                        // A missing cursor: wait for its transaction, or skip it once it is clearly gone.
                        let first_seen = match gap_seen {
                            Some((at, since)) if at == cursor + 1 => since,
                            _ => {
                                gap_seen = Some((cursor + 1, Instant::now()));
                                Instant::now()
                            }
                        };
                        if first_seen.elapsed() < GAP_PATIENCE {
                            break;
                        }
                    }
                    cursor = row.seq;
                    // No subscriber is fine: the event is in the table for later.
                    let _ = hub.fanout.send(Arc::new(row));
                }
                hub.delivered.store(cursor, Ordering::Release);
                if full {
                    continue;
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read the change events; retrying"),
        }
        let wait =
            if gap_seen.is_some_and(|(at, _)| at == cursor + 1) { Duration::from_millis(100) } else { POLL_EVERY };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = hub.poked.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Wakes the hub whenever another master publishes a poke; reconnects after a lost connection.
async fn listen_for_pokes(ctx: Context, url: String, shutdown: CancellationToken) {
    let channel = ctx.events().channel.clone();
    loop {
        let subscribed = async {
            let client = redis::Client::open(url.as_str())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        match subscribed.await {
            Ok(pubsub) => {
                let mut messages = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        message = messages.next() => match message {
                            Some(_) => ctx.events().poked.notify_one(),
                            None => break,
                        },
                    }
                }
                tracing::debug!("change pokes: Redis connection lost; reconnecting");
            }
            Err(error) => tracing::debug!(%error, "change pokes: cannot subscribe; retrying"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL_EVERY) => {}
        }
    }
}

fn cursor_ahead(newest: i64) -> ServiceError {
    ServiceError::new(
        ErrorKind::Conflict,
        codes::EVENTS_CURSOR_AHEAD,
        format!(
            "the cursor is beyond the newest one of this server ({newest}): it comes from another history (a restored backup?); \
             distrust what was agreed, list the folders again, then follow from the latest cursor"
        ),
    )
}

fn cursor_expired(floor: i64) -> ServiceError {
    ServiceError::new(
        ErrorKind::Gone,
        codes::EVENTS_CURSOR_EXPIRED,
        format!(
            "events up to cursor {floor} are no longer kept: list the folders again, then follow from the latest cursor"
        ),
    )
}

/// A subscription of one user: where it stands and the live events from there.
pub struct Subscription {
    ctx: Context,
    owner: UserId,
    /// The last cursor handed to the subscriber.
    pub cursor: i64,
    live: broadcast::Receiver<Arc<EventRow>>,
    /// Whether events past the cursor are to be read from the table first (at the start, and
    /// after falling behind the live ones).
    catching_up: bool,
}

/// Subscribes `owner` from `since` (exclusive; `None`: from now). A cursor older than what is
/// kept answers 410 `events.cursor_expired`, one beyond the newest this database handed out 409
/// `events.cursor_ahead`.
pub async fn subscribe(ctx: &Context, owner: Uuid, since: Option<i64>) -> ServiceResult<Subscription> {
    let hub = ctx.events();
    // Subscribed before anything is read: nothing delivered meanwhile is missed.
    let live = hub.fanout.subscribe();
    let floor = db::events::floor(ctx.db()).await?;
    let cursor = match since {
        Some(since) if since < floor => return Err(cursor_expired(floor)),
        Some(since) if since > floor => {
            // A cursor beyond anything handed out here comes from another history: replaying
            // "nothing since" would tell the client its agreements still hold.
            let newest = db::events::newest(ctx.db()).await?;
            if since > newest {
                return Err(cursor_ahead(newest));
            }
            since
        }
        Some(since) => since,
        // Never below the floor: events pruned before the hub delivered them would make the
        // cursor handed out here one that answers 410 at once.
        None => hub.delivered().max(floor),
    };
    Ok(Subscription { ctx: ctx.clone(), owner: owner.into(), cursor, live, catching_up: true })
}

impl Subscription {
    /// The cursor of the subscriber's newest change delivered so far (at least the cursor the
    /// subscription starts from): a client that only catches up is done once it has read a
    /// change with this cursor, and has nothing to read when it equals the start.
    pub async fn head(&self) -> ServiceResult<i64> {
        let delivered = self.ctx.events().delivered();
        Ok(db::events::newest_of_owner(self.ctx.db(), self.owner, delivered).await?.max(self.cursor))
    }

    /// The next events for the subscriber (waiting for them): first what the table holds beyond
    /// the cursor, up to what the hub delivered, then the live ones.
    pub async fn next_batch(&mut self) -> ServiceResult<Vec<ChangeEvent>> {
        loop {
            if self.catching_up {
                let upto = self.ctx.events().delivered();
                let rows = match upto > self.cursor {
                    true => db::events::of_owner(self.ctx.db(), self.owner, (self.cursor, upto), BATCH).await?,
                    false => Vec::new(),
                };
                let complete = (rows.len() as i64) < BATCH;
                // Live events up to `upto` are skipped by the cursor: the table gave them.
                self.cursor = match (complete, rows.last()) {
                    (false, Some(last)) => last.seq,
                    _ => upto.max(self.cursor),
                };
                self.catching_up = !complete;
                if !rows.is_empty() {
                    return Ok(rows.iter().map(ChangeEvent::from).collect());
                }
                continue;
            }
            match self.live.recv().await {
                Ok(row) if row.seq > self.cursor && row.owner_id == self.owner => {
                    self.cursor = row.seq;
                    return Ok(vec![ChangeEvent::from(row.as_ref())]);
                }
                Ok(_) => {}
                // Fell behind: the table has them.
                Err(broadcast::error::RecvError::Lagged(_)) => self.catching_up = true,
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(ServiceError::new(
                        ErrorKind::Unavailable,
                        codes::EVENTS_UNAVAILABLE,
                        "the server is stopping",
                    ));
                }
            }
        }
    }
}

/// The server's epoch: a random id made with the database, sent in `ready` so a sync client
/// notices when its agreements were made with another database.
pub async fn epoch(ctx: &Context) -> ServiceResult<String> {
    Ok(db::events::epoch(ctx.db()).await?)
}

/// Deletes the events older than the retention window (the periodic job).
pub async fn prune(ctx: &Context, now: Millis, keep: Duration) -> ServiceResult<usize> {
    Ok(db::events::prune(ctx.db(), now - keep.as_millis() as i64).await? as usize)
}

/// How long events are kept: the `events_retention_days` setting.
pub async fn retention(ctx: &Context) -> ServiceResult<Duration> {
    let settings = crate::service::site::effective_settings(ctx.db()).await?;
    let days = settings.get("events_retention_days").and_then(|d| d.parse::<u64>().ok()).unwrap_or(7).max(1);
    Ok(Duration::from_secs(days * 86_400))
}

/// Runs [`prune`] with the configured retention at the current time.
pub async fn prune_now(ctx: &Context) -> ServiceResult<usize> {
    prune(ctx, now_ms(), retention(ctx).await?).await
}
