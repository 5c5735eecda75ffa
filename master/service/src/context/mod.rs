//! The master's [`Context`]: what every request, job and service call shares (configuration,
//! database, key-value store, token keys, blob stores) and the plain state it holds (the event
//! hub, the instruments, what was built from the settings); cheap to clone. It names nothing of
//! the use cases above it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use nubo_common::metrics::Classifier;
use nubo_model::config::Config;
use nubo_model::db::Db;
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::time::Millis;
use nubo_model::kv::{KvStore, SharedStore};
use nubo_model::storage::StorageRegistry;

use crate::credentials::token::TokenKeys;

pub mod hub;
pub mod instruments;
pub mod memo;

use hub::EventHub;
use instruments::Instruments;
use memo::SettingsMemo;

/// What the front end tells the services about itself: the service floor knows no route.
#[derive(Clone, Copy)]
pub struct FrontEnd {
    /// Names the requests whose bodies are file bytes, by route template (for the metrics).
    pub classify: Classifier,
    pub links: Links,
}

/// Where the front end serves what a service hands out by URL, relative to the site.
#[derive(Clone, Copy)]
pub struct Links {
    /// A single-use download, by its token.
    pub download: fn(token: &str) -> String,
    /// A signed, reusable blob URL (the target of a download's redirect), by its token.
    pub blob: fn(token: &str) -> String,
    /// A reusable media URL for players, by its token.
    pub media: fn(token: &str) -> String,
    /// A file's permanent source link, by its id and (not yet encoded) name.
    pub source: fn(object: ObjectId, name: &str) -> String,
    /// A single-use archive, by its token.
    pub archive: fn(token: &str) -> String,
    /// A user's avatar at its largest size, with a version that changes with the avatar.
    pub avatar: fn(user: UserId, version: Millis) -> String,
    /// Where a sign-in provider sends its answer back, by the provider's name.
    pub sign_in_callback: fn(provider: &str) -> String,
}

/// What every request handler shares; cheap to clone.
#[derive(Clone)]
pub struct Context(Arc<Inner>);

struct Inner {
    config: Config,
    db: Db,
    store: SharedStore,
    tokens: TokenKeys,
    storage: StorageRegistry,
    source_downloads: Tally,
    /// Password checks waiting on this master, per share, account and address.
    waiting_checks: crate::credentials::password::WaitingChecks,
    /// What this master built from the settings (the viewer registry), with the version.
    memo: SettingsMemo,
    /// The fan-out of change events to this master's subscribers.
    events: EventHub,
    /// Metrics, kept only while a `metrics_token` is configured.
    instruments: Option<Instruments>,
    /// Where the front end serves what a service hands out by URL.
    links: Links,
    /// When this master started (its uptime in the admin summary).
    started: std::time::Instant,
    started_at: nubo_model::domain::time::Millis,
}

impl Context {
    /// Fails only when the signing secret is missing or too short. With metrics on, the store's
    /// failures are counted. The front end says what only it knows: which of its routes carry
    /// file bytes, and where it serves what a service names by URL.
    pub fn new(config: Config, db: Db, store: SharedStore, front_end: FrontEnd) -> anyhow::Result<Self> {
        let tokens = TokenKeys::new(config.signing_secret()?);
        let instruments = config.metrics_token().map(|token| Instruments::new(token.clone(), front_end.classify));
        let store = match &instruments {
            Some(instruments) => nubo_model::kv::metered::MeteredStore::wrap(store, instruments.registry.clone()),
            None => store,
        };
        let storage = StorageRegistry::new(&config.data_dir);
        let events = EventHub::new(format!("{}events", config.redis_prefix));
        Ok(Self(Arc::new(Inner {
            config,
            db,
            store,
            tokens,
            storage,
            source_downloads: Tally::default(),
            waiting_checks: Default::default(),
            memo: Default::default(),
            events,
            instruments,
            links: front_end.links,
            started: std::time::Instant::now(),
            started_at: nubo_model::domain::time::now_ms(),
        })))
    }

    pub fn store(&self) -> &dyn KvStore {
        self.0.store.as_ref()
    }

    /// The store as an owned handle, for what outlives a borrow (WebDAV lock systems).
    pub fn shared_store(&self) -> SharedStore {
        self.0.store.clone()
    }

    pub fn tokens(&self) -> &TokenKeys {
        &self.0.tokens
    }

    /// The blob store of each storage policy.
    pub fn storage(&self) -> &StorageRegistry {
        &self.0.storage
    }

    pub fn config(&self) -> &Config {
        &self.0.config
    }

    pub fn db(&self) -> &Db {
        &self.0.db
    }

    pub fn events(&self) -> &EventHub {
        &self.0.events
    }

    /// The URLs of the front end (relative to the site) for what a service hands out.
    pub fn links(&self) -> &Links {
        &self.0.links
    }

    /// The metrics of this master; `None` while metrics are off.
    pub fn instruments(&self) -> Option<&Instruments> {
        self.0.instruments.as_ref()
    }

    /// What this master built from the settings, for its builders to reuse.
    pub fn settings_memo(&self) -> &SettingsMemo {
        &self.0.memo
    }

    /// How long this master has run, and since when (milliseconds since the epoch).
    pub fn uptime(&self) -> (std::time::Duration, nubo_model::domain::time::Millis) {
        (self.0.started.elapsed(), self.0.started_at)
    }

    /// Password checks waiting or running on this master (see [`crate::credentials::password::WaitingChecks`]).
    pub fn waiting_checks(&self) -> &crate::credentials::password::WaitingChecks {
        &self.0.waiting_checks
    }

    /// Downloads through source links counted on this master and not yet written down.
    pub fn source_downloads(&self) -> &Tally {
        &self.0.source_downloads
    }
}

/// Counts per object kept in memory and written to the database in batches, so a hot read
/// does not cost a write each time. A master that dies loses what it had not written (at most
/// one flush interval's worth); counts are added, so several masters never overwrite each other.
#[derive(Debug, Default)]
pub struct Tally(Mutex<HashMap<ObjectId, i64>>);

impl Tally {
    pub fn add(&self, id: ObjectId) {
        *self.lock().entry(id).or_insert(0) += 1;
    }

    /// What was counted for `id` and not yet taken.
    pub fn pending(&self, id: ObjectId) -> i64 {
        self.lock().get(&id).copied().unwrap_or(0)
    }

    /// Everything counted so far, which the caller writes down (or gives back with
    /// [`Tally::restore`] when it cannot).
    pub fn take(&self) -> HashMap<ObjectId, i64> {
        std::mem::take(&mut *self.lock())
    }

    pub fn restore(&self, counts: HashMap<ObjectId, i64>) {
        let mut tally = self.lock();
        for (id, count) in counts {
            *tally.entry(id).or_insert(0) += count;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectId, i64>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
