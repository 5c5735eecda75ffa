//! Shares: a file or folder its owner opens to whoever holds the code (and the password, when it
//! has one). The owner's side (create, list, change, end) and the visitor's (the public view,
//! browsing a shared folder, download and archive tokens), with the counters, the limits and
//! the password grant. A visitor reaches objects only through `access::readable_in_share`.

/// A share list query, as the front end builds it.
pub use nubo_model::db::shares::ShareFilter;
use std::net::IpAddr;
use std::time::Duration;

use nubo_model::db::objects::ListingRow;
use nubo_model::db::shares::{NewShare as NewShareRow, ShareSettings, ShareWithObject};
use nubo_model::db::{self, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::object::ObjectKind;
use nubo_model::domain::time::{Millis, from_rfc3339, now_ms, to_rfc3339};
use nubo_model::domain::user::UserStatus;
use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::credentials::password::{hash_secret, verify_password};
use crate::credentials::token::{ShareGrantClaims, TokenType, token_error};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::tree::access::{self, Reach, Readable};
use crate::tree::files::{self, CopySource, ObjectView};
use crate::{Page, PageRequest, identity::groups, identity::sign_in, settings::site};
use nubo_common::secret::Secret;

/// Length of a share code: 12 characters of 64 give 72 random bits.
const CODE_LENGTH: usize = 12;
const CODE_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// How long a correct password opens its share.
const GRANT_LIFETIME: Duration = Duration::from_secs(3600);
/// Wrong passwords allowed per share and address, and per share from everyone, in the window.
const WRONG_PASSWORDS_PER_ADDRESS: u64 = 5;
const WRONG_PASSWORDS_PER_SHARE: u64 = 50;
const WRONG_PASSWORD_WINDOW: Duration = Duration::from_secs(15 * 60);
/// A visitor's views of one share count once in this long.
const VIEW_WINDOW: Duration = Duration::from_secs(30 * 60);
/// A share's password: short ones are common (it travels beside the link), so from 4 characters.
const PASSWORD_LENGTH: std::ops::RangeInclusive<usize> = 4..=256;

/// A new share of one of the caller's files or folders.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewShare {
    pub object_id: Uuid,
    /// Visitors must give it (stored as an argon2id hash; never shown again).
    #[schema(min_length = 4, max_length = 256)]
    pub password: Option<String>,
    /// RFC 3339; after it the share answers 410 `share.expired`.
    pub expires_at: Option<String>,
    /// After this many downloads the share answers 410 `share.download_limit_reached`.
    #[schema(minimum = 1)]
    pub max_downloads: Option<i64>,
    /// Whether visitors may preview files in the browser (default true).
    pub allow_preview: Option<bool>,
}

/// Changes to a share: an absent field stays, `null` removes the password, expiry or limit.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShareChanges {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub password: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub expires_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>)]
    pub max_downloads: Option<Option<i64>>,
    pub allow_preview: Option<bool>,
}

/// A field that was sent, `null` included (absent stays `None` through `#[serde(default)]`).
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A share as its owner sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShareView {
    pub code: String,
    /// Where visitors open it: its page in the web app (`/share/{code}`), on the site URL when one
    /// is set (the API resource is `/api/v1/share/{code}`).
    pub url: String,
    pub object_id: Uuid,
    pub name: String,
    pub kind: ObjectKind,
    pub password_protected: bool,
    pub expires_at: Option<String>,
    pub max_downloads: Option<i64>,
    pub allow_preview: bool,
    /// Visitor sessions that opened it (one per visitor per 30 minutes).
    pub views: i64,
    pub downloads: i64,
    /// Past `expires_at` or out of downloads.
    pub expired: bool,
    /// Whether visitors can open it now: false while its object is in the trash or its owner is
    /// banned or inactive (visitors then get 404), once `removed`, and when `expired`.
    pub available: bool,
    /// An administrator removed it after a report: visitors get 404 for good.
    pub removed: bool,
    pub created_at: String,
}

/// The owner of a share, as visitors see them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShareOwnerView {
    pub nickname: String,
}

/// A share as a visitor sees it. While it is `locked` (a password is needed and was not given)
/// only the code, the owner and the expiry are shown.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PublicShareView {
    pub code: String,
    pub owner: ShareOwnerView,
    pub password_required: bool,
    pub locked: bool,
    pub expires_at: Option<String>,
    pub allow_preview: bool,
    /// The shared object's id, name, kind and size (absent while locked).
    pub object_id: Option<Uuid>,
    pub name: Option<String>,
    pub kind: Option<ObjectKind>,
    pub size: Option<i64>,
    /// Sent back when a correct password was given: a grant for this share, to send as the
    /// `X-Share-Grant` header while browsing and downloading (valid an hour).
    pub grant: Option<String>,
}

/// An entry of a shared folder.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SharedEntryView {
    pub id: Uuid,
    pub name: String,
    pub kind: ObjectKind,
    pub size: i64,
    pub updated_at: String,
}

/// A folder inside a share: its path below the shared folder and one page of its entries,
/// folders first, then by name.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SharedFolderView {
    pub path: String,
    pub count: i64,
    pub items: Vec<SharedEntryView>,
}

/// What a visitor presents: the password (to open a locked share) or a grant from an earlier
/// answer, and where they come from (the rate limit and the view count key on it).
pub struct Visitor<'a> {
    pub password: Option<&'a str>,
    pub grant: Option<&'a str>,
    pub address: IpAddr,
    pub agent: &'a str,
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::SHARE_NOT_FOUND, "no such share")
}

fn not_allowed() -> ServiceError {
    ServiceError::new(ErrorKind::Forbidden, codes::SHARE_NOT_ALLOWED, "your group may not create shares")
}

fn expired() -> ServiceError {
    ServiceError::new(ErrorKind::Gone, codes::SHARE_EXPIRED, "this share has expired")
}

fn used_up() -> ServiceError {
    ServiceError::new(ErrorKind::Gone, codes::SHARE_DOWNLOAD_LIMIT_REACHED, "this share has reached its download limit")
}

fn password_required() -> ServiceError {
    ServiceError::new(
        ErrorKind::Unauthorized,
        codes::SHARE_PASSWORD_REQUIRED,
        "this share needs its password: open it with the password and send the grant as X-Share-Grant",
    )
}

fn path_invalid() -> ServiceError {
    ServiceError::new(ErrorKind::BadRequest, codes::SHARE_PATH_INVALID, "not a path inside the share")
}

fn on_code_clash(err: DbError) -> Option<ServiceError> {
    if err.is_unique_violation() { None } else { Some(err.into()) }
}

fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LENGTH).map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())])).collect()
}

fn parse_expiry(text: Option<&str>) -> ServiceResult<Option<Millis>> {
    text.map(|text| {
        from_rfc3339(text).ok_or_else(|| ServiceError::validation("expires_at", "must be an RFC 3339 time"))
    })
    .transpose()
}

fn check_limit(limit: Option<i64>) -> ServiceResult<Option<i64>> {
    match limit {
        Some(limit) if limit < 1 => Err(ServiceError::validation("max_downloads", "must be at least 1")),
        other => Ok(other),
    }
}

async fn hash_share_password(password: Option<&str>) -> ServiceResult<Option<String>> {
    let Some(password) = password else { return Ok(None) };
    if !PASSWORD_LENGTH.contains(&password.chars().count()) {
        return Err(ServiceError::validation("password", "must be 4 to 256 characters"));
    }
    let hash = hash_secret(&Secret::new(password)).await.map_err(ServiceError::internal)?;
    Ok(Some(hash))
}

/// The site URL share links start with (empty: they are site paths).
async fn site_base(ctx: &Context) -> ServiceResult<String> {
    site::link_base(ctx).await
}

/// The share's page in the web app, where a visitor opens it (the API resource is
/// `/api/v1/share/{code}`).
fn share_url(base: &str, code: &str) -> String {
    format!("{base}/share/{code}")
}

/// Whether the share is past its expiry or its downloads at `now`.
fn is_expired(share: &ShareWithObject, now: Millis) -> bool {
    let row = &share.share;
    row.expires_at.is_some_and(|at| at <= now) || row.max_downloads.is_some_and(|max| row.downloads >= max)
}

/// Whether visitors may reach the share's object at all (expiry aside): not while the object is
/// in the trash, the owner is not active, or an administrator removed the share after a report.
fn is_reachable(share: &ShareWithObject) -> bool {
    share.object_trashed_at.is_none() && share.owner_status == UserStatus::Active && share.share.removed_at.is_none()
}

/// The share's state for a visitor: missing while unreachable, gone once expired or used up.
fn open_for_visitors(share: &ShareWithObject, now: Millis) -> ServiceResult<()> {
    if !is_reachable(share) {
        return Err(not_found());
    }
    let row = &share.share;
    if row.expires_at.is_some_and(|at| at <= now) {
        return Err(expired());
    }
    if row.max_downloads.is_some_and(|max| row.downloads >= max) {
        return Err(used_up());
    }
    Ok(())
}

fn view(share: &ShareWithObject, url: String, now: Millis) -> ShareView {
    let row = &share.share;
    let expired = is_expired(share, now);
    ShareView {
        code: row.code.clone(),
        url,
        object_id: row.object_id.into(),
        name: share.object_name.clone(),
        kind: share.object_kind,
        password_protected: row.password_hash.is_some(),
        expires_at: row.expires_at.map(to_rfc3339),
        max_downloads: row.max_downloads,
        allow_preview: row.allow_preview,
        views: row.views,
        downloads: row.downloads,
        expired,
        available: !expired && is_reachable(share),
        removed: row.removed_at.is_some(),
        created_at: to_rfc3339(row.created_at),
    }
}

/// Creates a share of `input.object_id`, which the caller must own and which must not be in the
/// trash; the caller's group must allow shares.
pub async fn create(
    ctx: &Context,
    caller: UserId,
    group_id: nubo_model::domain::ids::GroupId,
    input: NewShare,
) -> ServiceResult<ShareView> {
    if !groups::permissions(ctx.db(), group_id).await?.share {
        return Err(not_allowed());
    }
    let object = access::readable(ctx, caller, input.object_id.into(), Reach::Live).await?;
    let expires_at = parse_expiry(input.expires_at.as_deref())?;
    let max_downloads = check_limit(input.max_downloads)?;
    let password_hash = hash_share_password(input.password.as_deref()).await?;
    let id = Uuid::new_v4();
    let mut attempts = 0;
    let code = loop {
        let code = new_code();
        let row = NewShareRow {
            id,
            code: &code,
            owner_id: caller,
            object_id: object.id(),
            password_hash: password_hash.as_deref(),
            expires_at,
            max_downloads,
            allow_preview: input.allow_preview.unwrap_or(true),
            created_at: now_ms(),
        };
        match db::shares::insert(ctx.db(), &row).await {
            Ok(()) => break code,
            Err(err) => match on_code_clash(err) {
                Some(error) => return Err(error),
                None if attempts < 5 => attempts += 1,
                None => return Err(ServiceError::internal(anyhow::anyhow!("no free share code after 6 draws"))),
            },
        }
    };
    let created = Activity::by(caller, Action::ShareCreate).on(TargetKind::Share, &code, Some(&code));
    activity::record(ctx.db(), created.with("object_id", object.id()).with("password", password_hash.is_some())).await;
    owned(ctx, caller, &code).await
}

/// The caller's share `code` (404 for anyone else's).
async fn find_owned(ctx: &Context, caller: UserId, code: &str) -> ServiceResult<ShareWithObject> {
    db::shares::find_by_code(ctx.db(), code).await?.filter(|share| share.share.owner_id == caller).ok_or_else(not_found)
}

/// The caller's share `code` as its owner sees it.
pub async fn owned(ctx: &Context, caller: UserId, code: &str) -> ServiceResult<ShareView> {
    let share = find_owned(ctx, caller, code).await?;
    Ok(view(&share, share_url(&site_base(ctx).await?, &share.share.code), now_ms()))
}

/// One page of the caller's shares, newest first; with `object`, only the shares of that object.
pub async fn list(
    ctx: &Context,
    caller: UserId,
    object: Option<ObjectId>,
    page: PageRequest,
) -> ServiceResult<Page<ShareView>> {
    let mine = db::shares::ShareFilter { owner_id: Some(caller), object_id: object, ..Default::default() };
    let (rows, count) = db::shares::page_filtered(ctx.db(), &mine, page.offset, page.limit).await?;
    let (base, now) = (site_base(ctx).await?, now_ms());
    let items = rows.iter().map(|share| view(share, share_url(&base, &share.share.code), now)).collect();
    Ok(Page { count, items })
}

/// Changes the caller's share `code`; a new password ends the grants of the old one.
pub async fn update(ctx: &Context, caller: UserId, code: &str, changes: ShareChanges) -> ServiceResult<ShareView> {
    let share = find_owned(ctx, caller, code).await?;
    let row = &share.share;
    let password_hash = match changes.password {
        None => row.password_hash.clone(),
        Some(password) => hash_share_password(password.as_deref()).await?,
    };
    let expires_at = match changes.expires_at {
        None => row.expires_at,
        Some(text) => parse_expiry(text.as_deref())?,
    };
    let max_downloads = match changes.max_downloads {
        None => row.max_downloads,
        Some(limit) => check_limit(limit)?,
    };
    let settings = ShareSettings {
        password_hash: password_hash.as_deref(),
        expires_at,
        max_downloads,
        allow_preview: changes.allow_preview.unwrap_or(row.allow_preview),
    };
    if !db::shares::update(ctx.db(), row.id, &settings).await? {
        return Err(not_found());
    }
    activity::record(ctx.db(), Activity::by(caller, Action::ShareUpdate).on(TargetKind::Share, code, Some(code))).await;
    owned(ctx, caller, code).await
}

/// Ends the caller's share `code`.
pub async fn delete(ctx: &Context, caller: UserId, code: &str) -> ServiceResult<()> {
    let share = find_owned(ctx, caller, code).await?;
    if !db::shares::delete(ctx.db(), share.share.id).await? {
        return Err(not_found());
    }
    let deleted = Activity::by(caller, Action::ShareDelete).on(TargetKind::Share, code, Some(code));
    activity::record(ctx.db(), deleted.with("object_name", &share.object_name)).await;
    Ok(())
}

/// What a visitor saves of a share into their own files.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveShare {
    /// Objects of the share to save (default: the shared object itself).
    pub object_ids: Option<Vec<Uuid>>,
    /// The caller's folder to save into.
    pub dst_id: Uuid,
}

/// Copies what the caller chose of share `code` into their folder `input.dst_id`, sharing the
/// stored blobs (no byte is copied) and charging the caller's quota in one transaction. The
/// caller's group needs the `share_save` permission.
pub async fn save(
    ctx: &Context,
    (caller, group_id): (UserId, nubo_model::domain::ids::GroupId),
    code: &str,
    visitor: &Visitor<'_>,
    input: SaveShare,
) -> ServiceResult<Vec<ObjectView>> {
    if !groups::permissions(ctx.db(), group_id).await?.share_save {
        return Err(ServiceError::new(
            ErrorKind::Forbidden,
            codes::SHARE_SAVE_NOT_ALLOWED,
            "your group may not save shares into its files",
        ));
    }
    let share = opened(ctx, code, visitor).await?;
    let row = &share.share;
    let ids = input.object_ids.unwrap_or_else(|| vec![row.object_id.into()]);
    let from = CopySource::Share { share_id: row.id, owner: row.owner_id, root: row.object_id };
    files::copy_from_share(ctx.db(), caller, from, &ids, input.dst_id.into()).await
}

/// A share as an administrator sees it: the owner's view and who owns it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AdminShareView {
    #[serde(flatten)]
    pub share: ShareView,
    pub owner_id: Uuid,
    pub owner_nickname: String,
}

/// One page of every user's shares matching `filter`, newest first (`admin_required`).
pub async fn admin_list(
    ctx: &Context,
    filter: &db::shares::ShareFilter<'_>,
    page: PageRequest,
) -> ServiceResult<Page<AdminShareView>> {
    let (rows, count) = db::shares::page_filtered(ctx.db(), filter, page.offset, page.limit).await?;
    let (base, now) = (site_base(ctx).await?, now_ms());
    let items = rows
        .iter()
        .map(|share| AdminShareView {
            share: view(share, share_url(&base, &share.share.code), now),
            owner_id: share.share.owner_id.into(),
            owner_nickname: share.owner_nickname.clone(),
        })
        .collect();
    Ok(Page { count, items })
}

/// Ends any user's share `code` (`admin_required`).
pub async fn admin_delete(ctx: &Context, actor: UserId, code: &str) -> ServiceResult<()> {
    let share = db::shares::find_by_code(ctx.db(), code).await?.ok_or_else(not_found)?;
    if !db::shares::delete(ctx.db(), share.share.id).await? {
        return Err(not_found());
    }
    let deleted = Activity::by(actor, Action::AdminShareDelete).on(TargetKind::Share, code, Some(code));
    activity::record(ctx.db(), deleted.with("owner_id", share.share.owner_id).with("object_name", &share.object_name))
        .await;
    Ok(())
}

/// Share `code` as a visitor who reports it finds it: it must be open to visitors (a password
/// need not have been given: the report names the share, not its content).
pub async fn reportable(ctx: &Context, code: &str) -> ServiceResult<ShareWithObject> {
    let share = db::shares::find_by_code(ctx.db(), code).await?.ok_or_else(not_found)?;
    open_for_visitors(&share, now_ms())?;
    Ok(share)
}

/// A short fingerprint of a password hash: grants carry it, so a changed password ends them.
fn password_fingerprint(hash: &str) -> String {
    nubo_common::hash::hash_hex(hash.as_bytes())[..16].to_owned()
}

/// Whether the visitor has opened `share`: it has no password, or they send a grant of its
/// current password, or the password itself (checked under the rate limits). Answers a new
/// grant when the password was given.
async fn unlock(ctx: &Context, share: &ShareWithObject, visitor: &Visitor<'_>) -> ServiceResult<Unlocked> {
    let Some(hash) = share.share.password_hash.as_deref() else { return Ok(Unlocked::Open) };
    let fingerprint = password_fingerprint(hash);
    if let Some(grant) = visitor.grant {
        let claims = ctx.tokens().verify_share_grant(grant).map_err(token_error)?;
        if claims.sub == share.share.id && claims.pwf == fingerprint {
            return Ok(Unlocked::Granted);
        }
    }
    let Some(password) = visitor.password else { return Ok(Unlocked::Locked) };
    let id = share.share.id;
    let limited = || {
        ServiceError::new(
            ErrorKind::RateLimited,
            codes::SHARE_RATE_LIMITED,
            "too many wrong passwords for this share, try again later",
        )
    };
    let subjects = [format!("share:{id}"), format!("addr:{}", visitor.address)];
    let _waiting = sign_in::wait_for_check(ctx, &subjects, limited)?;
    let budget = [
        (format!("rate:share:{id}:addr:{}", visitor.address), WRONG_PASSWORDS_PER_ADDRESS),
        (format!("rate:share:{id}"), WRONG_PASSWORDS_PER_SHARE),
    ];
    if !sign_in::charge_guess(ctx, &budget, WRONG_PASSWORD_WINDOW).await? {
        return Err(limited());
    }
    if !verify_password(&Secret::new(password), hash).await {
        return Err(ServiceError::new(ErrorKind::Forbidden, codes::SHARE_PASSWORD_WRONG, "the password is wrong"));
    }
    sign_in::refund_guess(ctx, &budget).await?;
    let now = now_ms() / 1000;
    let claims = ShareGrantClaims {
        sub: id,
        pwf: fingerprint,
        iat: now,
        exp: now + GRANT_LIFETIME.as_secs() as i64,
        typ: TokenType::ShareGrant,
    };
    Ok(Unlocked::NewGrant(ctx.tokens().sign(&claims)))
}

enum Unlocked {
    /// No password.
    Open,
    /// A valid grant was sent.
    Granted,
    /// The right password was sent: here is a grant.
    NewGrant(String),
    /// A password is needed and was not sent.
    Locked,
}

/// A reachable, unexpired share the visitor has unlocked (or 401 `share.password_required`).
pub(crate) async fn opened(ctx: &Context, code: &str, visitor: &Visitor<'_>) -> ServiceResult<ShareWithObject> {
    let share = db::shares::find_by_code(ctx.db(), code).await?.ok_or_else(not_found)?;
    open_for_visitors(&share, now_ms())?;
    match unlock(ctx, &share, visitor).await? {
        Unlocked::Locked => Err(password_required()),
        Unlocked::Open | Unlocked::Granted | Unlocked::NewGrant(_) => Ok(share),
    }
}

/// The public view of share `code`. A correct password unlocks it and answers a grant; an
/// unlocked view counts once per visitor (address and user agent) per 30 minutes.
pub async fn public_view(ctx: &Context, code: &str, visitor: &Visitor<'_>) -> ServiceResult<PublicShareView> {
    let share = db::shares::find_by_code(ctx.db(), code).await?.ok_or_else(not_found)?;
    open_for_visitors(&share, now_ms())?;
    let unlocked = unlock(ctx, &share, visitor).await?;
    let row = &share.share;
    let locked = matches!(unlocked, Unlocked::Locked);
    if !locked {
        let visitor_key = nubo_common::hash::hash_hex(format!("{}|{}", visitor.address, visitor.agent).as_bytes());
        let key = format!("share-view:{}:{}", row.id, &visitor_key[..32]);
        if ctx.store().set_if_absent(&key, "1", VIEW_WINDOW).await? {
            db::shares::count_view(ctx.db(), row.id).await?;
        }
    }
    Ok(PublicShareView {
        code: row.code.clone(),
        owner: ShareOwnerView { nickname: share.owner_nickname.clone() },
        password_required: row.password_hash.is_some(),
        locked,
        expires_at: row.expires_at.map(to_rfc3339),
        allow_preview: row.allow_preview,
        object_id: (!locked).then(|| row.object_id.into()),
        name: (!locked).then(|| share.object_name.clone()),
        kind: (!locked).then_some(share.object_kind),
        size: (!locked).then_some(share.object_size),
        grant: match unlocked {
            Unlocked::NewGrant(grant) => Some(grant),
            _ => None,
        },
    })
}

/// The names of `path` below a shared folder: no empty, `.` or `..` segment, no backslash or
/// NUL (a trailing `/` is allowed). `raw` is the path as sent, still percent-encoded: an encoded
/// separator is refused rather than taken as part of a name.
pub fn share_path_names<'a>(path: &'a str, raw: &str) -> ServiceResult<Vec<&'a str>> {
    let lowered = raw.to_ascii_lowercase();
    if lowered.contains("%2f") || lowered.contains("%5c") || lowered.contains("%00") {
        return Err(path_invalid());
    }
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<&str> = trimmed.split('/').collect();
    if names.iter().any(|name| name.is_empty() || *name == "." || *name == ".." || name.contains(['\\', '\0'])) {
        return Err(path_invalid());
    }
    Ok(names)
}

/// One page of the folder at `path` below shared folder `code` (`raw`: the path as sent, see
/// [`share_path_names`]). The share is checked first: an unknown code answers 404 whatever the
/// path.
pub async fn browse(
    ctx: &Context,
    code: &str,
    visitor: &Visitor<'_>,
    (path, raw): (&str, &str),
    page: PageRequest,
) -> ServiceResult<SharedFolderView> {
    let share = opened(ctx, code, visitor).await?;
    let names = share_path_names(path, raw)?;
    if share.object_kind != ObjectKind::Folder {
        return Err(ServiceError::conflict(codes::OBJECT_NOT_A_FOLDER, "the share is a file, not a folder"));
    }
    let root = share.share.object_id;
    let mut folder = root;
    if !names.is_empty() {
        let found = db::objects::walk(ctx.db(), db::objects::WalkStart::Below(root), &names).await?;
        let last = found.last().filter(|_| found.len() == names.len()).ok_or_else(access::not_found)?;
        if last.kind != ObjectKind::Folder {
            return Err(ServiceError::conflict(codes::OBJECT_NOT_A_FOLDER, "the object is a file, not a folder"));
        }
        folder = last.id;
    }
    let rows: Vec<ListingRow> = db::objects::all_live_children(ctx.db(), folder).await?;
    let count = rows.len() as i64;
    let items = rows
        .into_iter()
        .skip(page.offset as usize)
        .take(page.limit as usize)
        .map(|row| SharedEntryView {
            id: row.id.into(),
            name: row.name,
            kind: row.kind,
            size: row.size,
            updated_at: to_rfc3339(row.updated_at),
        })
        .collect();
    Ok(SharedFolderView { path: format!("/{}", names.join("/")), count, items })
}

/// Object `object_id` when it is share `share`'s object or below it.
pub(crate) async fn reach(share: &ShareWithObject, ctx: &Context, object_id: ObjectId) -> ServiceResult<Readable> {
    let row = &share.share;
    access::readable_in_share(ctx.db(), row.id, (row.owner_id, row.object_id), object_id).await
}

/// The file a share's download token names, when the share still serves it; with `count`
/// (a `GET`, not a `HEAD`) the download is counted, within the share's limit.
pub async fn readable_for_download(
    ctx: &Context,
    share_id: Uuid,
    object_id: ObjectId,
    count: bool,
) -> ServiceResult<Readable> {
    let mut served = served(ctx, share_id, &[object_id.into()], count).await?;
    served.pop().ok_or_else(access::not_found)
}

fn preview_not_allowed() -> ServiceError {
    ServiceError::new(
        ErrorKind::Forbidden,
        codes::SHARE_PREVIEW_NOT_ALLOWED,
        "the owner of this share does not allow previews: download the file instead",
    )
}

/// Object `object_id` through share `share_id` for a preview (a thumbnail, a media URL), when
/// the share still serves it and allows previews; with `count` one download is counted (a
/// media URL is the whole content).
pub(crate) async fn previewable(
    ctx: &Context,
    share_id: Uuid,
    object_id: ObjectId,
    count: bool,
) -> ServiceResult<Readable> {
    let share = db::shares::find_by_id(ctx.db(), share_id).await?.ok_or_else(not_found)?;
    if !share.share.allow_preview {
        return Err(preview_not_allowed());
    }
    served_by(ctx, &share, &[object_id.into()], count).await?.pop().ok_or_else(access::not_found)
}

/// Object `object_id` of share `code` for its visitor to preview (a thumbnail, a media URL):
/// the share opened, allowing previews, and the object in it.
pub async fn preview_in(
    ctx: &Context,
    code: &str,
    visitor: &Visitor<'_>,
    object_id: ObjectId,
) -> ServiceResult<Readable> {
    let share = opened(ctx, code, visitor).await?;
    if !share.share.allow_preview {
        return Err(preview_not_allowed());
    }
    reach(&share, ctx, object_id).await
}

/// The objects a share's archive token names, when the share still serves them all; with
/// `count` the archive counts as one download, within the share's limit.
pub async fn readable_for_archive(
    ctx: &Context,
    share_id: Uuid,
    object_ids: &[Uuid],
    count: bool,
) -> ServiceResult<Vec<Readable>> {
    served(ctx, share_id, object_ids, count).await
}

/// `object_ids` through share `share_id` if it still serves each of them; with `count` one
/// download is counted (refused past the limit).
async fn served(ctx: &Context, share_id: Uuid, object_ids: &[Uuid], count: bool) -> ServiceResult<Vec<Readable>> {
    let share = db::shares::find_by_id(ctx.db(), share_id).await?.ok_or_else(not_found)?;
    served_by(ctx, &share, object_ids, count).await
}

async fn served_by(
    ctx: &Context,
    share: &ShareWithObject,
    object_ids: &[Uuid],
    count: bool,
) -> ServiceResult<Vec<Readable>> {
    let share_id = share.share.id;
    let now = now_ms();
    open_for_visitors(share, now)?;
    let mut objects = Vec::with_capacity(object_ids.len());
    for id in object_ids {
        objects.push(reach(share, ctx, (*id).into()).await?);
    }
    if count && !db::shares::count_download(ctx.db(), share_id, now).await? {
        return Err(used_up());
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_long_url_safe_and_differ() {
        let (a, b) = (new_code(), new_code());
        assert_eq!(a.len(), CODE_LENGTH);
        assert!(a.bytes().all(|c| CODE_ALPHABET.contains(&c)), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn paths_stay_inside_the_share() {
        assert_eq!(share_path_names("a/b/", "a/b/").unwrap(), ["a", "b"]);
        assert!(share_path_names("", "").unwrap().is_empty());
        for bad in ["a/../b", "..", "./a", "a//b", "a\\b"] {
            assert_eq!(share_path_names(bad, bad).unwrap_err().code, codes::SHARE_PATH_INVALID, "{bad}");
        }
        assert_eq!(share_path_names("a/b", "a%2Fb").unwrap_err().code, codes::SHARE_PATH_INVALID);
        assert_eq!(share_path_names("a/b", "a%2fb").unwrap_err().code, codes::SHARE_PATH_INVALID);
    }
}
