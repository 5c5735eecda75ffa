//! The master's [`Context`]: what every request, job and service call shares (configuration,
//! database, key-value store, token keys, blob stores); cheap to clone.

use std::sync::Arc;

use crate::auth::token::TokenKeys;
use crate::config::Config;
use crate::db::Db;
use crate::kv::{KvStore, SharedStore};
use crate::storage::StorageRegistry;

/// What every request handler shares; cheap to clone.
#[derive(Clone)]
pub struct Context(Arc<Inner>);

struct Inner {
    config: Config,
    db: Db,
    store: SharedStore,
    tokens: TokenKeys,
    storage: StorageRegistry,
}

impl Context {
    /// Fails only when the signing secret is missing or too short.
    pub fn new(config: Config, db: Db, store: SharedStore) -> anyhow::Result<Self> {
        let tokens = TokenKeys::new(config.signing_secret()?);
        let storage = StorageRegistry::new(&config.data_dir);
        Ok(Self(Arc::new(Inner { config, db, store, tokens, storage })))
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
}
