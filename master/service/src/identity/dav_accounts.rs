//! WebDAV accounts: the caller's named credentials for `/dav` (each with its own password, root
//! folder and read-only flag), and the HTTP Basic check of `/dav`, cached in the [`KvStore`]
//! for a minute and dropped when the account changes or goes. A ban, a move to another group and
//! a change of the group's permissions bite at once: the cached result is only used while the
//! user's revocation entries (see [`revocation`]) say nothing happened since it was made.
//!
//! [`KvStore`]: nubo_model::kv::KvStore

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use nubo_common::secret::Secret;
use nubo_model::db::webdav_accounts::WebdavAccountRow;
use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::object::parse_path;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_model::domain::user::{Email, UserStatus};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::context::Context;
use crate::credentials::password::{generate_password, hash_password, verify_password};
use crate::credentials::revocation;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::providers::password;
use crate::{identity::accounts, identity::groups, identity::sign_in, tree::files};

/// How long a successful check is reused without hashing the password again.
const AUTH_CACHE_LIFETIME: Duration = Duration::from_secs(60);
/// Failed sign-ins allowed per account name in [`FAILURE_WINDOW`] before it answers 429.
const MAX_FAILURES: u64 = 20;
const FAILURE_WINDOW: Duration = Duration::from_secs(15 * 60);
const MAX_NAME_CHARS: usize = 64;

/// Keys the password digests kept in the cache. Random per process: a master that cannot read
/// another's digest just checks the password itself once.
static CACHE_DIGEST_KEY: LazyLock<[u8; 32]> = LazyLock::new(rand::random);

/// An account as its owner sees it (never its password).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebdavAccountView {
    pub id: Uuid,
    /// Sign in to `/dav` as `{email}/{name}`.
    pub name: String,
    /// The folder the account sees as `/dav/`, a path in the owner's tree.
    pub root: String,
    pub read_only: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// A created (or re-keyed) account; `password` is present once, when the server generated it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebdavAccountCreated {
    #[serde(flatten)]
    pub account: WebdavAccountView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// A new account; without `password` the server generates one and shows it once.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebdavAccount {
    #[schema(min_length = 1, max_length = 64)]
    pub name: String,
    pub password: Option<String>,
    /// Defaults to `/`.
    pub root: Option<String>,
    #[serde(default)]
    pub read_only: bool,
}

/// Changes to an account; absent fields stay. `generate_password` replaces the password with a
/// generated one, shown once in the answer.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebdavAccountChanges {
    pub name: Option<String>,
    pub password: Option<String>,
    #[serde(default)]
    pub generate_password: bool,
    pub root: Option<String>,
    pub read_only: Option<bool>,
}

/// Who a `/dav` request acts for, once its credentials checked out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DavPrincipal {
    pub user_id: UserId,
    pub group_id: GroupId,
    pub account_id: Uuid,
    pub root: String,
    pub read_only: bool,
}

#[derive(Serialize, Deserialize)]
struct CachedCheck {
    digest: String,
    principal: DavPrincipal,
    /// The owner's and their group's claims versions when the password was verified.
    user_version: i64,
    group_version: i64,
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::WEBDAV_ACCOUNT_NOT_FOUND, "no such WebDAV account")
}

fn invalid_credentials() -> ServiceError {
    ServiceError::new(ErrorKind::Unauthorized, codes::AUTH_INVALID_CREDENTIALS, "wrong WebDAV account or password")
}

fn view(row: &WebdavAccountRow) -> ServiceResult<WebdavAccountView> {
    Ok(WebdavAccountView {
        id: row.id,
        name: row.name.clone(),
        root: row.root_path.clone(),
        read_only: row.read_only,
        created_at: to_rfc3339(row.created_at),
        updated_at: to_rfc3339(row.updated_at),
    })
}

fn parse_name(raw: &str) -> ServiceResult<String> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.contains('/') || name.contains(char::is_control)
    {
        return Err(ServiceError::validation(
            "name",
            "account names are 1 to 64 characters without '/' or control characters",
        ));
    }
    Ok(name.to_owned())
}

/// The canonical form of a root path, which must name a live folder of the owner.
async fn parse_root(ctx: &Context, owner: UserId, raw: &str) -> ServiceResult<String> {
    let names = parse_path(raw).map_err(|why| ServiceError::validation("root", why))?;
    let canonical = format!("/{}", names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join("/"));
    let folder = files::resolve_path(ctx.db(), owner, &canonical).await.map_err(|e| match e.kind {
        ErrorKind::NotFound => ServiceError::validation("root", "no folder at that path"),
        _ => e,
    })?;
    if !folder.is_folder() {
        return Err(ServiceError::validation("root", "the root must be a folder"));
    }
    Ok(canonical)
}

async fn hash(password: &Secret) -> ServiceResult<String> {
    hash_password(password).await.map_err(|e| accounts::password_error("password", e))
}

fn webdav_not_allowed() -> ServiceError {
    ServiceError::new(ErrorKind::Forbidden, codes::WEBDAV_NOT_ALLOWED, "your group may not use WebDAV")
}

fn on_name_clash(err: DbError) -> ServiceError {
    match err {
        ref e if e.is_unique_violation() => {
            ServiceError::conflict(codes::WEBDAV_NAME_TAKEN, "you already have a WebDAV account with that name")
                .with_field("name")
        }
        other => other.into(),
    }
}

pub async fn list(ctx: &Context, owner: UserId) -> ServiceResult<Vec<WebdavAccountView>> {
    db::webdav_accounts::list_of(ctx.db(), owner).await?.iter().map(view).collect()
}

pub async fn get(ctx: &Context, owner: UserId, id: Uuid) -> ServiceResult<WebdavAccountView> {
    view(&load(ctx, owner, id).await?)
}

async fn load(ctx: &Context, owner: UserId, id: Uuid) -> ServiceResult<WebdavAccountRow> {
    db::webdav_accounts::find_owned(ctx.db(), owner, id).await?.ok_or_else(not_found)
}

/// Creates an account; the owner's group must allow WebDAV.
pub async fn create(
    ctx: &Context,
    owner: UserId,
    group_id: GroupId,
    input: NewWebdavAccount,
) -> ServiceResult<WebdavAccountCreated> {
    if !groups::permissions(ctx.db(), group_id).await?.webdav {
        return Err(webdav_not_allowed());
    }
    let name = parse_name(&input.name)?;
    let root = parse_root(ctx, owner, input.root.as_deref().unwrap_or("/")).await?;
    let (password, shown) = match input.password {
        Some(given) => (Secret::new(given), None),
        None => {
            let generated = generate_password();
            let shown = generated.expose().to_owned();
            (generated, Some(shown))
        }
    };
    let now = now_ms();
    let row = WebdavAccountRow {
        id: Uuid::new_v4(),
        owner_id: owner,
        name,
        password_hash: hash(&password).await?,
        root_path: root,
        read_only: input.read_only,
        created_at: now,
        updated_at: now,
    };
    db::webdav_accounts::insert(ctx.db(), &row).await.map_err(on_name_clash)?;
    Ok(WebdavAccountCreated { account: view(&row)?, password: shown })
}

/// Changes an account; a cached sign-in of it is forgotten at once.
pub async fn update(
    ctx: &Context,
    owner: UserId,
    id: Uuid,
    changes: WebdavAccountChanges,
) -> ServiceResult<WebdavAccountCreated> {
    let mut row = load(ctx, owner, id).await?;
    let before = row.name.clone();
    if let Some(name) = &changes.name {
        row.name = parse_name(name)?;
    }
    if let Some(root) = &changes.root {
        row.root_path = parse_root(ctx, owner, root).await?;
    }
    if let Some(read_only) = changes.read_only {
        row.read_only = read_only;
    }
    let mut shown = None;
    if changes.generate_password {
        if changes.password.is_some() {
            return Err(ServiceError::validation("password", "give a password or ask for a generated one, not both"));
        }
        let generated = generate_password();
        row.password_hash = hash(&generated).await?;
        shown = Some(generated.expose().to_owned());
    } else if let Some(given) = changes.password {
        row.password_hash = hash(&Secret::new(given)).await?;
    }
    row.updated_at = now_ms();
    if !db::webdav_accounts::update(ctx.db(), &row).await.map_err(on_name_clash)? {
        return Err(not_found());
    }
    forget(ctx, owner, &before).await?;
    Ok(WebdavAccountCreated { account: view(&row)?, password: shown })
}

pub async fn delete(ctx: &Context, owner: UserId, id: Uuid) -> ServiceResult<()> {
    let row = load(ctx, owner, id).await?;
    if !db::webdav_accounts::delete(ctx.db(), owner, row.id).await? {
        return Err(not_found());
    }
    forget(ctx, owner, &row.name).await
}

fn cache_key(email: &str, name: &str) -> String {
    format!("webdav-auth:{email}/{name}")
}

/// Drops the cached sign-in of the owner's account `name`.
async fn forget(ctx: &Context, owner: UserId, name: &str) -> ServiceResult<()> {
    if let Some(user) = db::users::find(ctx.db(), owner).await? {
        ctx.store().delete(&cache_key(&user.email, name)).await?;
    }
    Ok(())
}

fn digest(password: &Secret) -> blake3::Hash {
    blake3::keyed_hash(&CACHE_DIGEST_KEY, password.expose().as_bytes())
}

/// The principal of a recent successful sign-in with the same password, unless the owner was
/// banned, moved to another group, or their group's permissions changed since.
async fn cached_principal(ctx: &Context, key: &str, presented: &blake3::Hash) -> ServiceResult<Option<DavPrincipal>> {
    let Some(cached) = ctx.store().get(key).await? else { return Ok(None) };
    let Ok(cached) = serde_json::from_str::<CachedCheck>(&cached) else { return Ok(None) };
    // `blake3::Hash` compares in constant time.
    if !blake3::Hash::from_hex(&cached.digest).is_ok_and(|d| d == *presented) {
        return Ok(None);
    }
    let standing = revocation::standing(ctx.store(), cached.principal.user_id, cached.principal.group_id).await?;
    if standing.banned {
        return Err(ServiceError::user_inactive());
    }
    // A privilege change since the check: verify again against the database.
    if !standing.admits(cached.user_version, cached.group_version) {
        return Ok(None);
    }
    Ok(Some(cached.principal))
}

/// The lock sign-ins of one `{email}/{name}` take while they verify a password on this master.
fn sign_in_lock(key: &str) -> Arc<tokio::sync::Mutex<()>> {
    static IN_FLIGHT: LazyLock<std::sync::Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Default::default);
    let mut in_flight = IN_FLIGHT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(lock) = in_flight.get(key).and_then(Weak::upgrade) {
        return lock;
    }
    in_flight.retain(|_, lock| lock.strong_count() > 0);
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    in_flight.insert(key.to_owned(), Arc::downgrade(&lock));
    lock
}

/// Checks HTTP Basic credentials of `/dav`: `username` is `{email}/{account name}` (split at
/// the last `/`). A recent success for the same password is reused from the store; otherwise
/// the password is verified (argon2) and the owner must be active with WebDAV allowed.
pub async fn authenticate(ctx: &Context, username: &str, password: &Secret) -> ServiceResult<DavPrincipal> {
    let (email, name) = username.rsplit_once('/').ok_or_else(invalid_credentials)?;
    let email = Email::parse(email).map_err(|_| invalid_credentials())?;
    let key = cache_key(email.as_str(), name);
    let presented = digest(password);
    if let Some(principal) = cached_principal(ctx, &key, &presented).await? {
        return Ok(principal);
    }
    // Clients open several connections at once, each with the same credentials: one of them
    // verifies the password (argon2: CPU and 19 MiB each) and the others then find it cached.
    let in_flight = sign_in_lock(&key);
    let _verifying = in_flight.lock().await;
    if let Some(principal) = cached_principal(ctx, &key, &presented).await? {
        return Ok(principal);
    }
    let failures_key = format!("webdav-auth-failures:{}/{name}", email.as_str());
    let found = db::webdav_accounts::find_for_login(ctx.db(), email.as_str(), name).await?;
    let verified = match &found {
        Some(login) => verify_password(password, &login.account.password_hash).await,
        None => {
            // Same work for an unknown account as for a wrong password.
            let _ = verify_password(password, password::dummy_hash().await?).await;
            false
        }
    };
    let Some(login) = found.filter(|_| verified) else {
        if ctx.store().increment(&failures_key, FAILURE_WINDOW).await? > MAX_FAILURES {
            return Err(sign_in::rate_limited());
        }
        return Err(invalid_credentials());
    };
    let user_id = login.account.owner_id;
    if login.user_status != UserStatus::Active || revocation::is_banned(ctx.store(), user_id).await? {
        return Err(ServiceError::user_inactive());
    }
    if !groups::permissions(ctx.db(), login.group_id).await?.webdav {
        return Err(webdav_not_allowed());
    }
    let principal = DavPrincipal {
        user_id,
        group_id: login.group_id,
        account_id: login.account.id,
        root: login.account.root_path.clone(),
        read_only: login.account.read_only,
    };
    let cached = CachedCheck {
        digest: presented.to_hex().to_string(),
        principal: principal.clone(),
        user_version: login.user_version,
        group_version: login.group_version,
    };
    let value = serde_json::to_string(&cached).map_err(ServiceError::internal)?;
    ctx.store().set(&key, &value, Some(AUTH_CACHE_LIFETIME)).await?;
    Ok(principal)
}
