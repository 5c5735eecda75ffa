//! Change events for sync clients (`GET /events`): each master's hub reads the events the
//! database triggers wrote (every master's writes land in the same table) and fans them out to
//! its subscribers; a write request pokes every master's hub at once (through Redis pub/sub when
//! configured, in-process otherwise), and a poll every second catches writes of background jobs.
//! Subscribers replay what they missed from the table, up to the cursor the hub has delivered,
//! so replay and live delivery meet without a gap or a repeat.
//!
//! A subscription also holds one of its user's few places for streams (counted in the KvStore,
//! so the cap holds on every master) and ends when the token it was opened with expires, is
//! revoked, or its user is banned: an open stream is not a way around either.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use std::sync::atomic::Ordering;

use nubo_model::db::{self, events::EventRow};
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::{Millis, now_ms, to_rfc3339};
use nubo_model::kv::{Lease, SharedStore};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::credentials::revocation;
use crate::credentials::token::JwtPayload;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// Events read per query.
const BATCH: i64 = 1000;
/// The hub looks at the table at least this often (jobs' writes poke nobody).
const POLL_EVERY: Duration = Duration::from_secs(1);
/// On SQLite, a cursor missing from the sequence is skipped after this long (its one writer
/// commits cursors in order, so a gap there is a rolled-back write).
const GAP_PATIENCE: Duration = Duration::from_secs(3);
/// On PostgreSQL a missing cursor is waited for until every transaction that was running when
/// it was first missed has ended (one of them holds it, or it rolled back), however long that
/// takes, up to this bound: a write transaction open longer is a fault elsewhere, and holding
/// every live delivery behind it would be worse (its events stay in the table for `since`).
const GAP_LIMIT: Duration = Duration::from_secs(600);
/// How long a stream's place among its user's streams lasts in the store unless renewed; the
/// places of a master that died free themselves after it.
const STREAM_PLACE_LEASE: Duration = Duration::from_secs(60);
/// How often an open stream looks again at its token's standing (a ban, a revocation) and
/// renews its place: a banned user's stream ends within this.
pub const STREAM_RECHECK: Duration = Duration::from_secs(5);

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
    let mut gap: Option<Gap> = None;
    loop {
        // Settled before the read, so a transaction that ended by now has its events in it.
        let settled = match &gap {
            Some(gap) if gap.at == cursor + 1 => gap.settled(&ctx).await.then_some(gap.at),
            _ => None,
        };
        match db::events::after(ctx.db(), cursor, BATCH).await {
            Ok(rows) => {
                let full = rows.len() as i64 == BATCH;
                for row in rows {
                    if row.seq != cursor + 1 && settled != Some(cursor + 1) {
                        // A missing cursor: wait until it commits, or is known never to.
                        if gap.as_ref().is_none_or(|gap| gap.at != cursor + 1) {
                            gap = Some(Gap::seen(&ctx, cursor + 1).await);
                        }
                        break;
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
            if gap.as_ref().is_some_and(|gap| gap.at == cursor + 1) { Duration::from_millis(100) } else { POLL_EVERY };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = hub.poked.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// A cursor missing from the sequence of events, where the hub waits: PostgreSQL hands out
/// cursors before commit, so a transaction still running (a big copy, a trash of a large
/// folder) holds it, unless it rolled back.
struct Gap {
    /// The first missing cursor.
    at: i64,
    since: Instant,
    /// On PostgreSQL, the transactions running just after it was first missed: the one holding
    /// it is among them, or had already ended.
    running: Option<String>,
}

impl Gap {
    async fn seen(ctx: &Context, at: i64) -> Self {
        let running = db::events::running_transactions(ctx.db()).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot read the running transactions; a missing cursor is waited for by time");
            None
        });
        Self { at, since: Instant::now(), running }
    }

    /// Whether the missing cursor can be passed: every transaction that could hold it has ended
    /// (PostgreSQL), or it has been missing for [`GAP_PATIENCE`] (SQLite).
    async fn settled(&self, ctx: &Context) -> bool {
        let Some(running) = &self.running else { return self.since.elapsed() >= GAP_PATIENCE };
        if self.since.elapsed() >= GAP_LIMIT {
            tracing::warn!(
                cursor = self.at,
                "a transaction has held a change event's cursor for 10 minutes; passing it"
            );
            return true;
        }
        match db::events::transactions_ended(ctx.db(), running).await {
            Ok(ended) => ended,
            Err(error) => {
                tracing::warn!(%error, "cannot read whether transactions ended; waiting");
                false
            }
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
    /// The token the stream was opened with, looked at again every [`STREAM_RECHECK`].
    claims: JwtPayload,
    next_check: Instant,
    /// The place among the user's streams, given back when the subscription is dropped.
    place: Option<Lease>,
}

/// Takes a free one of `owner`'s `places` for event streams (a lease on
/// `event-stream:{user}:{n}`, given back when the subscription is dropped, renewed while it
/// delivers), or refuses with 429 `events.too_many_streams`.
async fn take_stream_place(store: SharedStore, owner: Uuid, places: u32) -> ServiceResult<Lease> {
    for place in 0..places {
        let key = format!("event-stream:{owner}:{place}");
        if let Some(lease) = Lease::take(store.clone(), key, STREAM_PLACE_LEASE).await? {
            return Ok(lease);
        }
    }
    Err(ServiceError::new(
        ErrorKind::RateLimited,
        codes::EVENTS_TOO_MANY_STREAMS,
        format!("at most {places} event streams may be open at once: close one first"),
    ))
}

/// Subscribes the owner of `claims` from `since` (exclusive; `None`: from now). A cursor older
/// than what is kept answers 410 `events.cursor_expired`, one beyond the newest this database
/// handed out 409 `events.cursor_ahead`; a user who holds every place for streams already, 429
/// `events.too_many_streams`.
pub async fn subscribe(ctx: &Context, claims: &JwtPayload, since: Option<i64>) -> ServiceResult<Subscription> {
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
    let places = ctx.config().max_event_streams_per_user;
    let place = match places {
        0 => None,
        places => Some(take_stream_place(ctx.shared_store(), claims.sub.as_uuid(), places).await?),
    };
    Ok(Subscription {
        ctx: ctx.clone(),
        owner: claims.sub,
        cursor,
        live,
        catching_up: true,
        claims: claims.clone(),
        next_check: Instant::now() + STREAM_RECHECK,
        place,
    })
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
    /// the cursor, up to what the hub delivered, then the live ones. Fails, ending the stream,
    /// once the token expires (401 `auth.token_expired`), is revoked (401) or its user is banned
    /// (403).
    pub async fn next_batch(&mut self) -> ServiceResult<Vec<ChangeEvent>> {
        loop {
            self.check_standing().await?;
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
            let due = self.next_check_due();
            let received = tokio::select! {
                received = self.live.recv() => received,
                () = tokio::time::sleep_until(due.into()) => continue,
            };
            match received {
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

impl Subscription {
    /// When the stream must next look at its token: the next recheck, or its expiry if sooner.
    fn next_check_due(&self) -> Instant {
        let left = Duration::from_millis(u64::try_from(self.claims.exp * 1000 - now_ms()).unwrap_or(0));
        self.next_check.min(Instant::now() + left)
    }

    /// Ends the stream once its token expired, and, every [`STREAM_RECHECK`], when the token
    /// was revoked or its user banned since (the same check every request passes); renews the
    /// stream's place meanwhile.
    async fn check_standing(&mut self) -> ServiceResult<()> {
        if now_ms() >= self.claims.exp * 1000 {
            return Err(ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_TOKEN_EXPIRED, "token has expired"));
        }
        if Instant::now() < self.next_check {
            return Ok(());
        }
        revocation::check(self.ctx.store(), &self.claims).await?;
        if let Some(place) = &self.place {
            place.renew().await?;
        }
        self.next_check = Instant::now() + STREAM_RECHECK;
        Ok(())
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
    let days = crate::settings::site::current(ctx).await?.events_retention_days.max(1);
    Ok(Duration::from_secs(u64::from(days) * 86_400))
}

/// Runs [`prune`] with the configured retention at the current time.
pub async fn prune_now(ctx: &Context) -> ServiceResult<usize> {
    prune(ctx, now_ms(), retention(ctx).await?).await
}
