//! The blob store of each storage policy, built from the policy's options (or, for a policy
//! bound to a storage node, from the node's record) on first use and rebuilt when either changes.

pub mod node;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nubo_common::secret::Secret;
use nubo_common::storage::BlobStore;
use nubo_common::storage::local::LocalBlobStore;
use nubo_common::storage::s3::{S3BlobStore, S3Config};

use self::node::NodeBlobStore;
use crate::db::nodes::NodeRow;
use crate::db::policies::PolicyRow;
use crate::domain::ids::{NodeId, PolicyId};
use crate::domain::policy::{LocalOptions, PolicyOptions};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("policy options are invalid: {0}")]
    Options(String),
}

/// A built store and the policy version (`updated_at`) it was built from.
type Versioned = (i64, Arc<dyn BlobStore>);

/// Blob stores by policy id, and node stores by node id.
pub struct StorageRegistry {
    data_dir: PathBuf,
    stores: Mutex<HashMap<PolicyId, Versioned>>,
    nodes: Mutex<HashMap<NodeId, Versioned>>,
}

impl StorageRegistry {
    pub fn new(data_dir: &Path) -> Self {
        Self { data_dir: data_dir.to_owned(), stores: Mutex::new(HashMap::new()), nodes: Mutex::new(HashMap::new()) }
    }

    /// Where a local policy keeps its blobs.
    pub fn local_root(&self, options: &LocalOptions) -> PathBuf {
        let root = if options.root.is_empty() { "uploads" } else { options.root.as_str() };
        let path = Path::new(root);
        if path.is_absolute() { path.to_owned() } else { self.data_dir.join(path) }
    }

    /// The store of `policy`, built now if the policy is new or changed since.
    pub fn store(&self, policy: &PolicyRow) -> Result<Arc<dyn BlobStore>, RegistryError> {
        if let Some((version, store)) = self.lock().get(&policy.id)
            && *version == policy.updated_at
        {
            return Ok(store.clone());
        }
        let store = self.build(policy)?;
        self.lock().insert(policy.id, (policy.updated_at, store.clone()));
        Ok(store)
    }

    /// Builds a store without caching it (to test options before saving them).
    pub fn build(&self, policy: &PolicyRow) -> Result<Arc<dyn BlobStore>, RegistryError> {
        match &policy.options {
            PolicyOptions::Local(options) => {
                Ok(Arc::new(LocalBlobStore::new(self.local_root(options)).durable(options.durable)))
            }
            PolicyOptions::S3(options) => {
                let options = options.clone();
                let config = S3Config {
                    endpoint: (!options.endpoint.is_empty()).then_some(options.endpoint),
                    region: options.region,
                    bucket: options.bucket,
                    path_style: options.path_style,
                    access_key: options.access_key,
                    secret_key: Secret::new(options.secret_key),
                    prefix: (!options.prefix.is_empty()).then_some(options.prefix),
                };
                let store = S3BlobStore::new(&config).map_err(|e| RegistryError::Options(e.to_string()))?;
                Ok(Arc::new(store))
            }
        }
    }

    /// The store of a storage node (shared by every policy bound to it), rebuilt when the
    /// node's record changes (a new key or URL).
    pub fn node_store(&self, node: &NodeRow) -> Result<Arc<dyn BlobStore>, RegistryError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((version, store)) = nodes.get(&node.id)
            && *version == node.updated_at
        {
            return Ok(store.clone());
        }
        let store: Arc<dyn BlobStore> = Arc::new(NodeBlobStore::new(node).map_err(RegistryError::Options)?);
        nodes.insert(node.id, (node.updated_at, store.clone()));
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PolicyId, Versioned>> {
        self.stores.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
