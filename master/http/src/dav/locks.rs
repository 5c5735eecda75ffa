//! WebDAV locks kept in the [`KvStore`], so every master sharing the store sees the same locks:
//! one key per locked resource (its locks) and a small per-user index of the locked resources
//! (paths and expiry times, no owners), changed under a short store-held mutex. Paths are
//! matched in the user's whole tree (the account's root plus the request path), so two
//! accounts of one user with different roots agree too. The rules are those of dav-server's
//! in-memory `MemLs`, plus RFC 4918 7.4: a depth-0 lock on a folder guards its membership.
//! Locks are bounded: [`MAX_LOCKS_PER_USER`], [`MAX_LOCKS_PER_RESOURCE`], a lifetime of at most
//! [`LONGEST_LOCK`], and an owner of at most `guard::MAX_LOCK_OWNER` bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use dav_server::davpath::DavPath;
use dav_server::ls::{DavLock, DavLockSystem, LsFuture};
use futures_util::FutureExt;
use nubo_model::domain::ids::UserId;
use nubo_model::kv::{KvStore, StoreError};
use serde::{Deserialize, Serialize};
use uuid::Uuid;
use xmltree::{Element, Namespace};

use nubo_service::error::ServiceError;
use nubo_service::error_codes as codes;

/// The longest a lock lives without a refresh; a longer or infinite `Timeout` gets this, and
/// the answer says so (clients refresh before it ends).
pub const LONGEST_LOCK: Duration = Duration::from_secs(3600);
/// Live locks one user may hold in all.
pub const MAX_LOCKS_PER_USER: usize = 1000;
/// Live locks on one resource (shared locks; an exclusive one is alone anyway).
pub const MAX_LOCKS_PER_RESOURCE: usize = 100;
/// How long one master may hold a user's lock index while it changes it.
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

/// One locked resource in a user's index: where, and when each of its locks ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Indexed {
    segments: Vec<String>,
    expiries: Vec<u64>,
}

impl Indexed {
    fn live(&self, now: u64) -> usize {
        self.expiries.iter().filter(|&&at| at > now).count()
    }
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".to_owned())
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Why a lock was refused other than by a conflicting lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    TooManyForUser,
    TooManyOnResource,
}

impl Refusal {
    pub fn error(self) -> ServiceError {
        let message = match self {
            Self::TooManyForUser => format!("you hold {MAX_LOCKS_PER_USER} WebDAV locks already: release some first"),
            Self::TooManyOnResource => {
                format!("this resource has {MAX_LOCKS_PER_RESOURCE} WebDAV locks already: release some first")
            }
        };
        ServiceError::conflict(codes::DAV_TOO_MANY_LOCKS, message)
    }
}

/// The lock system of one request: the user's locks, seen from the account's root.
#[derive(Clone)]
pub struct KvLocks {
    store: Arc<dyn KvStore>,
    user: UserId,
    root: Vec<String>,
    /// Paths (from the user's root) whose folder gains or loses a member in this request: a
    /// depth-0 lock on that folder must be held too (RFC 4918 7.4).
    member_changes: Arc<Vec<Vec<String>>>,
    /// Set when a lock was refused for a limit, so the answer can say which.
    refusal: Arc<Mutex<Option<Refusal>>>,
}

impl std::fmt::Debug for KvLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvLocks").field("user", &self.user).field("root", &self.root).finish()
    }
}

/// A lock answered when the store cannot be read (or a limit is reached): requests fail closed
/// (423) rather than ignoring locks they cannot see.
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

/// The locks of the resources read for one operation, and the index they were found in.
struct Loaded {
    index: Vec<Indexed>,
    /// Live locks of each resource read, by its segments.
    resources: HashMap<Vec<String>, Vec<StoredLock>>,
    /// Those locks as read (JSON), so a resource left unchanged is not written back.
    as_read: HashMap<Vec<String>, String>,
}

impl Loaded {
    fn all(&self) -> Vec<StoredLock> {
        self.resources.values().flatten().cloned().collect()
    }
}

impl KvLocks {
    pub fn new(store: Arc<dyn KvStore>, user: UserId, root: Vec<String>, member_changes: &[&DavPath]) -> Self {
        let mut locks = Self { store, user, root, member_changes: Arc::default(), refusal: Arc::default() };
        locks.member_changes = Arc::new(member_changes.iter().map(|path| locks.segments(path)).collect());
        locks
    }

    /// The limit a `LOCK` of this request ran into, if any.
    pub fn refusal(&self) -> Option<Refusal> {
        *self.refusal.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn index_key(&self) -> String {
        format!("dav-lock-index:{}", self.user)
    }

    fn resource_key(&self, segments: &[String]) -> String {
        format!("dav-lock:{}:{}", self.user, blake3::hash(segments.join("/").as_bytes()).to_hex())
    }

    fn segments(&self, path: &DavPath) -> Vec<String> {
        let mut segments = self.root.clone();
        segments.extend(super::segments(path).into_iter().map(str::to_owned));
        segments
    }

    async fn read_index(&self) -> Result<Vec<Indexed>, StoreError> {
        let now = unix_now();
        let index: Vec<Indexed> = match self.store.get(&self.index_key()).await? {
            Some(json) => serde_json::from_str(&json).unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(index.into_iter().filter(|entry| entry.live(now) > 0).collect())
    }

    /// The live locks of the resource at `segments`.
    async fn read_resource(&self, segments: &[String]) -> Result<Vec<StoredLock>, StoreError> {
        let now = unix_now();
        let locks: Vec<StoredLock> = match self.store.get(&self.resource_key(segments)).await? {
            Some(json) => serde_json::from_str(&json).unwrap_or_default(),
            None => Vec::new(),
        };
        Ok(locks.into_iter().filter(|lock| lock.expires_at > now).collect())
    }

    /// The locks that matter to `segments`: on it and on the folders above it, and with
    /// `below` also on anything under it. Resources without locks are not read.
    async fn load(&self, segments: &[String], below: bool) -> Result<Loaded, StoreError> {
        let index = self.read_index().await?;
        let wanted: Vec<&Indexed> = index
            .iter()
            .filter(|entry| segments.starts_with(&entry.segments) || (below && entry.segments.starts_with(segments)))
            .collect();
        let read = futures_util::future::try_join_all(wanted.iter().map(|entry| self.read_resource(&entry.segments)));
        let resources: HashMap<_, _> = wanted.iter().map(|entry| entry.segments.clone()).zip(read.await?).collect();
        let as_read = resources.iter().map(|(segments, locks)| (segments.clone(), to_json(locks))).collect();
        Ok(Loaded { index, resources, as_read })
    }

    /// Runs `change` on the locks `load(segments, below)` finds, under the user's mutex, and
    /// stores every resource it read (and the index) as `change` left them.
    async fn update<T>(
        &self,
        segments: &[String],
        below: bool,
        change: impl FnOnce(&mut Loaded) -> T,
    ) -> Result<T, StoreError> {
        let mutex = format!("dav-locks-mutex:{}", self.user);
        let holder = Uuid::new_v4().to_string();
        let deadline = tokio::time::Instant::now() + MUTEX_LEASE;
        while !self.store.set_if_absent(&mutex, &holder, MUTEX_LEASE).await? {
            if tokio::time::Instant::now() > deadline {
                return Err(StoreError::Unavailable("the WebDAV lock index stays busy".into()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let result = async {
            let mut loaded = self.load(segments, below).await?;
            let answer = change(&mut loaded);
            self.store_changes(loaded).await?;
            Ok(answer)
        }
        .await;
        if self.store.get(&mutex).await?.as_deref() == Some(holder.as_str()) {
            self.store.delete(&mutex).await?;
        }
        result
    }

    /// Writes each resource of `loaded` (deleting the empty ones) and the index to match.
    async fn store_changes(&self, loaded: Loaded) -> Result<(), StoreError> {
        let now = unix_now();
        let Loaded { mut index, resources, as_read } = loaded;
        for (segments, locks) in resources {
            index.retain(|entry| entry.segments != segments);
            let key = self.resource_key(&segments);
            if locks.is_empty() {
                self.store.delete(&key).await?;
                continue;
            }
            let json = to_json(&locks);
            let expiries: Vec<u64> = locks.iter().map(|lock| lock.expires_at).collect();
            if as_read.get(&segments) != Some(&json) {
                let longest = expiries.iter().max().copied().unwrap_or(now).saturating_sub(now);
                self.store.set(&key, &json, Some(Duration::from_secs(longest + 60))).await?;
            }
            index.push(Indexed { segments, expiries });
        }
        if index.is_empty() {
            self.store.delete(&self.index_key()).await?;
        } else {
            let longest =
                index.iter().flat_map(|e| e.expiries.iter()).max().copied().unwrap_or(now).saturating_sub(now);
            let json = to_json(&index);
            self.store.set(&self.index_key(), &json, Some(Duration::from_secs(longest + 60))).await?;
        }
        Ok(())
    }

    /// A depth-0 lock on the folder of `segments` not held by `claim`, when this request adds
    /// or removes `segments` as a member of that folder (RFC 4918 7.4; deeper locks are found
    /// by the usual checks).
    fn membership_conflict<'t>(
        &self,
        claim: &Claim<'_>,
        locks: &'t [StoredLock],
        segments: &[String],
    ) -> Result<(), &'t StoredLock> {
        let Some((_, folder)) = segments.split_last() else { return Ok(()) };
        if !self.member_changes.iter().any(|changed| changed.as_slice() == segments) {
            return Ok(());
        }
        match locks.iter().find(|lock| !lock.deep && lock.segments.as_slice() == folder && !claim.holds(lock)) {
            Some(lock) => Err(lock),
            None => Ok(()),
        }
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
                .update(&segments, deep, |loaded| {
                    let now = unix_now();
                    let held: usize = loaded.index.iter().map(|entry| entry.live(now)).sum();
                    let here = loaded.resources.get(&segments).map_or(0, Vec::len);
                    let refusal = if held >= MAX_LOCKS_PER_USER {
                        Some(Refusal::TooManyForUser)
                    } else if here >= MAX_LOCKS_PER_RESOURCE {
                        Some(Refusal::TooManyOnResource)
                    } else {
                        None
                    };
                    if let Some(refusal) = refusal {
                        *self.refusal.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(refusal);
                        return Err(None);
                    }
                    let anyone = Claim { principal: None, ignore_principal: true, tokens: &[], shared_ok: shared };
                    anyone.conflict(&loaded.all(), &segments, deep).map_err(|lock| Some(lock.to_dav()))?;
                    let lock = StoredLock {
                        token: Uuid::new_v4().urn().to_string(),
                        segments: segments.clone(),
                        url,
                        principal,
                        owner,
                        expires_at: now + lifetime.as_secs(),
                        // What the answer's `Timeout` says: the lifetime granted.
                        timeout_seconds: Some(lifetime.as_secs()),
                        shared,
                        deep,
                    };
                    let answer = lock.to_dav();
                    loaded.resources.entry(segments.clone()).or_default().push(lock);
                    Ok(answer)
                })
                .await;
            match outcome {
                Ok(Ok(lock)) => Ok(lock),
                Ok(Err(conflict)) => Err(conflict.unwrap_or(fallback)),
                Err(error) => {
                    tracing::warn!(%error, "cannot take a WebDAV lock");
                    Err(fallback)
                }
            }
        }
        .boxed()
    }

    fn unlock(&'_ self, path: &DavPath, token: &str) -> LsFuture<'_, Result<(), ()>> {
        let segments = self.segments(path);
        let token = token.to_owned();
        async move {
            self.update(&segments, false, |loaded| {
                for locks in loaded.resources.values_mut() {
                    if let Some(index) = locks.iter().position(|l| l.token == token && l.covers(&segments)) {
                        locks.remove(index);
                        return Ok(());
                    }
                }
                Err(())
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
            self.update(&segments, false, |loaded| {
                let lock = loaded
                    .resources
                    .values_mut()
                    .flatten()
                    .find(|l| l.token == token && l.covers(&segments))
                    .ok_or(())?;
                let lifetime = timeout.unwrap_or(LONGEST_LOCK).min(LONGEST_LOCK);
                lock.expires_at = unix_now() + lifetime.as_secs();
                lock.timeout_seconds = Some(lifetime.as_secs());
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
            let loaded = match self.load(&segments, deep).await {
                Ok(loaded) => loaded,
                Err(error) => {
                    tracing::warn!(%error, "cannot read WebDAV locks");
                    return Err(fallback);
                }
            };
            let locks = loaded.all();
            let claim = Claim { principal: principal.as_deref(), ignore_principal, tokens: &tokens, shared_ok: false };
            claim.conflict(&locks, &segments, deep).map_err(StoredLock::to_dav)?;
            // dav-server evaluates `If` tokens with `ignore_principal`; only the checks of the
            // method itself guard membership.
            if !ignore_principal {
                self.membership_conflict(&claim, &locks, &segments).map_err(StoredLock::to_dav)?;
            }
            Ok(())
        }
        .boxed()
    }

    fn discover(&'_ self, path: &DavPath) -> LsFuture<'_, Vec<DavLock>> {
        let segments = self.segments(path);
        async move {
            let mut found: Vec<StoredLock> = match self.load(&segments, false).await {
                Ok(loaded) => loaded.all().into_iter().filter(|l| l.covers(&segments)).collect(),
                Err(_) => Vec::new(),
            };
            found.sort_by_key(|l| l.segments.len());
            found.iter().map(StoredLock::to_dav).collect()
        }
        .boxed()
    }

    fn delete(&'_ self, path: &DavPath) -> LsFuture<'_, Result<(), ()>> {
        let segments = self.segments(path);
        async move {
            self.update(&segments, true, |loaded| {
                for locks in loaded.resources.values_mut() {
                    locks.retain(|l| !l.segments.starts_with(&segments));
                }
            })
            .await
            .map_err(|error| {
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
