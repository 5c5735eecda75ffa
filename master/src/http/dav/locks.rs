//! WebDAV locks kept in the [`KvStore`], so every master sharing the store sees the same locks:
//! one JSON table per user, changed under a short store-held mutex. Paths are matched in the
//! user's whole tree (the account's root plus the request path), so two accounts of one user
//! with different roots agree too. The rules are those of dav-server's in-memory `MemLs`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use futures_util::FutureExt;
use serde::{Deserialize, Serialize};
use uuid::Uuid;
use xmltree::{Element, Namespace};

use crate::store::{KvStore, StoreError};

/// A lock without a timeout still ends after a day, so an abandoned one cannot stay forever.
const LONGEST_LOCK: Duration = Duration::from_secs(24 * 3600);
/// How long one master may hold a user's lock table while it changes it.
const MUTEX_LEASE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredLock {
    token: String,
    /// Segments of the locked path from the user's root.
    segments: Vec<String>,
    /// The path as the locking client named it (percent-encoded, with the `/dav` prefix).
    url: String,
    principal: Option<String>,
    owner: Option<String>,
    /// Unix seconds after which the lock is gone.
    expires_at: u64,
    timeout_seconds: Option<u64>,
    shared: bool,
    deep: bool,
}

impl StoredLock {
    fn covers(&self, segments: &[String]) -> bool {
        segments.starts_with(&self.segments)
    }

    fn to_dav(&self) -> DavLock {
        let mut path = DavPath::new(&self.url).unwrap_or_else(|_| DavPath::new("/").expect("root path"));
        let _ = path.set_prefix(super::PREFIX);
        DavLock {
            token: self.token.clone(),
            path: Box::new(path),
            principal: self.principal.clone(),
            owner: self.owner.as_deref().and_then(|xml| Element::parse(xml.as_bytes()).ok()).map(Box::new),
            timeout_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(self.expires_at)),
            timeout: self.timeout_seconds.map(Duration::from_secs),
            shared: self.shared,
            deep: self.deep,
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The lock system of one request: the user's table, seen from the account's root.
#[derive(Clone)]
pub struct KvLocks {
    store: Arc<dyn KvStore>,
    user: Uuid,
    root: Vec<String>,
}

impl std::fmt::Debug for KvLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvLocks").field("user", &self.user).field("root", &self.root).finish()
    }
}

/// A lock answered when the store cannot be read: requests fail closed (423) rather than
/// ignoring locks they cannot see.
fn unavailable(path: &DavPath) -> DavLock {
    DavLock {
        token: "opaquelocktoken:unavailable".to_owned(),
        path: Box::new(path.clone()),
        principal: None,
        owner: None,
        timeout_at: None,
        timeout: None,
        shared: false,
        deep: true,
    }
}

impl KvLocks {
    pub fn new(store: Arc<dyn KvStore>, user: Uuid, root: Vec<String>) -> Self {
        Self { store, user, root }
    }

    fn table_key(&self) -> String {
        format!("dav-locks:{}", self.user)
    }

    fn segments(&self, path: &DavPath) -> Vec<String> {
        let mut segments = self.root.clone();
        segments.extend(super::segments(path).into_iter().map(str::to_owned));
        segments
    }

    async fn read(&self) -> Result<Vec<StoredLock>, StoreError> {
        let now = unix_now();
        let table: Vec<StoredLock> = match self.store.get(&self.table_key()).await? {
            Some(json) => serde_json::from_str(&json).unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(table.into_iter().filter(|lock| lock.expires_at > now).collect())
    }

    /// Runs `change` on the live table under the user's mutex and stores the result.
    async fn update<T>(&self, change: impl FnOnce(&mut Vec<StoredLock>) -> T) -> Result<T, StoreError> {
        let mutex = format!("dav-locks-mutex:{}", self.user);
        let holder = Uuid::new_v4().to_string();
        let deadline = tokio::time::Instant::now() + MUTEX_LEASE;
        while !self.store.set_if_absent(&mutex, &holder, MUTEX_LEASE).await? {
            if tokio::time::Instant::now() > deadline {
                return Err(StoreError::Unavailable("the WebDAV lock table stays busy".into()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let result = async {
            let mut table = self.read().await?;
            let answer = change(&mut table);
            let json = serde_json::to_string(&table).unwrap_or_else(|_| "[]".to_owned());
            let longest = table.iter().map(|l| l.expires_at).max().unwrap_or(0).saturating_sub(unix_now());
            if table.is_empty() {
                self.store.delete(&self.table_key()).await?;
            } else {
                self.store.set(&self.table_key(), &json, Some(Duration::from_secs(longest + 60))).await?;
            }
            Ok(answer)
        }
        .await;
        if self.store.get(&mutex).await?.as_deref() == Some(holder.as_str()) {
            self.store.delete(&mutex).await?;
        }
        result
    }
}

/// Who asks, with which lock tokens, and whether shared locks may stay: the arguments of
/// `MemLs`'s checks.
struct Claim<'a> {
    principal: Option<&'a str>,
    ignore_principal: bool,
    tokens: &'a [String],
    shared_ok: bool,
}

impl Claim<'_> {
    /// Whether the claim holds `lock`: its token, and its principal unless that is ignored.
    fn holds(&self, lock: &StoredLock) -> bool {
        self.tokens.contains(&lock.token) && (self.ignore_principal || self.principal == lock.principal.as_deref())
    }

    /// The first lock in the way of `segments`: on it or on a folder above that reaches it
    /// and, when `deep`, anywhere below it.
    fn conflict<'t>(&self, table: &'t [StoredLock], segments: &[String], deep: bool) -> Result<(), &'t StoredLock> {
        self.check_to_path(table, segments)?;
        if deep { self.check_from_path(table, segments) } else { Ok(()) }
    }

    /// Locks on `segments` or on a folder above it that reach it (`MemLs::check_locks_to_path`).
    fn check_to_path<'t>(&self, table: &'t [StoredLock], segments: &[String]) -> Result<(), &'t StoredLock> {
        let mut holds_lock = false;
        let mut first_seen = None;
        let mut above: Vec<&StoredLock> = table.iter().filter(|l| l.covers(segments)).collect();
        above.sort_by_key(|l| l.segments.len());
        for lock in above {
            if lock.segments.len() < segments.len() && !lock.deep {
                continue;
            }
            if self.holds(lock) {
                holds_lock = true;
            } else {
                if !lock.shared {
                    return Err(lock);
                }
                if !self.shared_ok {
                    first_seen.get_or_insert(lock);
                }
            }
        }
        match first_seen {
            Some(lock) if !holds_lock => Err(lock),
            _ => Ok(()),
        }
    }

    /// Locks on `segments` or anything below it (`MemLs::check_locks_from_path`).
    fn check_from_path<'t>(&self, table: &'t [StoredLock], segments: &[String]) -> Result<(), &'t StoredLock> {
        match table
            .iter()
            .filter(|l| l.segments.starts_with(segments))
            .find(|lock| (!lock.shared || !self.shared_ok) && !self.holds(lock))
        {
            Some(lock) => Err(lock),
            None => Ok(()),
        }
    }
}

/// The lock's `owner` element as stored XML. dav-server renames it `D:owner`, which only
/// parses back where `D` is declared, so the declaration is added here (clients such as
/// neon send `<owner>` in the default `DAV:` namespace).
fn stored_owner(owner: &Element) -> Option<String> {
    let mut owner = owner.clone();
    owner.namespaces.get_or_insert_with(Namespace::empty).force_put("D", "DAV:");
    let mut xml = Vec::new();
    owner.write(&mut xml).ok()?;
    String::from_utf8(xml).ok()
}

impl DavLockSystem for KvLocks {
    fn lock(
        &'_ self,
        path: &DavPath,
        principal: Option<&str>,
        owner: Option<&Element>,
        timeout: Option<Duration>,
        shared: bool,
        deep: bool,
    ) -> LsFuture<'_, Result<DavLock, DavLock>> {
        let segments = self.segments(path);
        let url = path.with_prefix().as_url_string();
        let principal = principal.map(str::to_owned);
        let owner = owner.and_then(stored_owner);
        let fallback = unavailable(path);
        async move {
            let lifetime = timeout.unwrap_or(LONGEST_LOCK).min(LONGEST_LOCK);
            let outcome = self
                .update(|table| {
                    let anyone = Claim { principal: None, ignore_principal: true, tokens: &[], shared_ok: shared };
                    anyone.conflict(table, &segments, deep).map_err(StoredLock::to_dav)?;
                    let lock = StoredLock {
                        token: Uuid::new_v4().urn().to_string(),
                        segments: segments.clone(),
                        url,
                        principal,
                        owner,
                        expires_at: unix_now() + lifetime.as_secs(),
                        timeout_seconds: timeout.map(|t| t.as_secs()),
                        shared,
                        deep,
                    };
                    let answer = lock.to_dav();
                    table.push(lock);
                    Ok(answer)
                })
                .await;
            outcome.unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot take a WebDAV lock");
                Err(fallback)
            })
        }
        .boxed()
    }

    fn unlock(&'_ self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let segments = self.segments(path);
        let token = token.to_owned();
        async move {
            self.update(|table| {
                let found = table.iter().position(|l| l.token == token && l.covers(&segments));
                found.map(|index| drop(table.remove(index))).ok_or(())
            })
            .await
            .unwrap_or(Err(()))
        }
        .boxed()
    }

    fn refresh(&'_ self, path: &DavPath, token: &str, timeout: Option<Duration>) -> LsFuture<'_, Result<DavLock, ()>> {
        let segments = self.segments(path);
        let token = token.to_owned();
        async move {
            self.update(|table| {
                let lock = table.iter_mut().find(|l| l.token == token && l.covers(&segments)).ok_or(())?;
                let lifetime = timeout.unwrap_or(LONGEST_LOCK).min(LONGEST_LOCK);
                lock.expires_at = unix_now() + lifetime.as_secs();
                lock.timeout_seconds = timeout.map(|t| t.as_secs());
                Ok(lock.to_dav())
            })
            .await
            .unwrap_or(Err(()))
        }
        .boxed()
    }

    fn check(
        &'_ self,
        path: &DavPath,
        principal: Option<&str>,
        ignore_principal: bool,
        deep: bool,
        submitted_tokens: &[String],
    ) -> LsFuture<'_, Result<(), DavLock>> {
        let segments = self.segments(path);
        let principal = principal.map(str::to_owned);
        let tokens = submitted_tokens.to_vec();
        let fallback = unavailable(path);
        async move {
            let table = match self.read().await {
                Ok(table) => table,
                Err(error) => {
                    tracing::warn!(%error, "cannot read WebDAV locks");
                    return Err(fallback);
                }
            };
            let claim = Claim { principal: principal.as_deref(), ignore_principal, tokens: &tokens, shared_ok: false };
            claim.conflict(&table, &segments, deep).map_err(StoredLock::to_dav)
        }
        .boxed()
    }

    fn discover(&'_ self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let segments = self.segments(path);
        async move {
            let mut found: Vec<StoredLock> =
                self.read().await.unwrap_or_default().into_iter().filter(|l| l.covers(&segments)).collect();
            found.sort_by_key(|l| l.segments.len());
            found.iter().map(StoredLock::to_dav).collect()
        }
        .boxed()
    }

    fn delete(&'_ self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let segments = self.segments(path);
        async move {
            self.update(|table| table.retain(|l| !l.segments.starts_with(&segments))).await.map_err(|error| {
                tracing::warn!(%error, "cannot drop WebDAV locks");
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_in_the_default_namespace_survives_the_store() {
        let xml = r#"<lockinfo xmlns="DAV:"><owner>litmus <href>x</href> suite</owner></lockinfo>"#;
        let root = Element::parse(xml.as_bytes()).unwrap();
        let mut owner = root.get_child("owner").unwrap().clone();
        owner.prefix = Some("D".to_owned()); // as dav-server's LOCK handler does
        let stored = stored_owner(&owner).expect("owner serialises");
        let back = Element::parse(stored.as_bytes()).expect("stored owner parses");
        assert_eq!(back.name, "owner");
        assert_eq!(back.namespace.as_deref(), Some("DAV:"));
        let href = back.get_child("href").expect("child element kept");
        assert_eq!(href.namespace.as_deref(), Some("DAV:"));
        assert_eq!(href.get_text().as_deref(), Some("x"));
        assert_eq!(back.children.len(), 3, "text around the child kept: {back:?}");
    }
}
