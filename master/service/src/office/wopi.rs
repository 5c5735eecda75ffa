//! The WOPI host: sessions (access tokens scoped to one file, one user, view or edit), the
//! operations a WOPI client calls on a file (CheckFileInfo, GetFile, PutFile, PutRelativeFile,
//! RenameFile, DeleteFile) and its locks, kept in the [`KvStore`](nubo_model::kv::KvStore) so every
//! master agrees. Writes go through `service::content::writes` like every other write. How the answers
//! look on the wire (headers, status codes) is `http::wopi`'s business.

use std::time::Duration;

use nubo_common::storage::ByteStream;
use nubo_model::db;
use nubo_model::db::objects::ObjectRow;
use nubo_model::db::users::UserRow;
use nubo_model::domain::ids::{ObjectId, UserId};
use nubo_model::domain::object::ObjectName;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::content::downloads::{self, Download, expect_file};
use crate::context::Context;
use crate::credentials::token::{TokenType, WopiClaims, token_error};
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::accounts::{self, ActiveUser};
use crate::tree::access::{self, Reach, Readable};
use crate::{content::writes, office::wopi_apps, tree::files};

/// How long a WOPI access token lives (WOPI clients keep a session open for a working day).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 3600);
/// How long a WOPI lock lives unless refreshed (the WOPI specification's 30 minutes).
pub const LOCK_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// The longest lock id accepted (WOPI's `SupportsExtendedLockLength`: 1024 ASCII characters).
pub const MAX_LOCK_LENGTH: usize = 1024;

/// What a WOPI session may do with its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WopiMode {
    #[default]
    View,
    /// Needs write access to the file.
    Edit,
}

/// A WOPI session for the web app to hand to a WOPI client (in the form it posts to `action_url`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WopiSession {
    /// The WOPI application's page for this file (its `WOPISrc` filled in); null when the
    /// session was opened without an application.
    pub action_url: Option<String>,
    /// The WOPI access token (scoped to this file, this user and the mode).
    pub access_token: String,
    /// When the token expires, in milliseconds since the epoch (as WOPI expects).
    pub access_token_ttl: i64,
    /// The file's WOPI endpoint (`WOPISrc`).
    pub wopi_src: String,
}

/// Opens a session on `file_id` for `caller`: the caller must be able to read the file, and
/// to write it for [`WopiMode::Edit`]. With an application, the session answers its action URL
/// for the file's extension, and every request made with the token must carry that
/// application's proof. Without one, the token is all a client needs (no more than the
/// caller's own API token allows). `base` is the site address the WOPI client reaches this
/// master at.
pub async fn open_session(
    ctx: &Context,
    caller: UserId,
    (file_id, mode): (ObjectId, WopiMode),
    app: Option<Uuid>,
    base: &str,
) -> ServiceResult<WopiSession> {
    let file = match mode {
        WopiMode::View => access::readable(ctx, caller, file_id, Reach::Live).await?,
        WopiMode::Edit => access::writable(ctx, caller, file_id, Reach::Live).await?.as_readable().clone(),
    };
    expect_file(file.row())?;
    let edit = mode == WopiMode::Edit;
    let src = wopi_src(base, file.id());
    let action_url = match app {
        Some(app) => {
            let ext = extension(&file.row().name).trim_start_matches('.');
            Some(wopi_apps::action_for(ctx, app, ext, edit, &src).await?)
        }
        None => None,
    };
    let user = accounts::load_active_user(ctx, caller).await?;
    let (access_token, access_token_ttl) = issue_token(ctx, user.row(), file.id(), edit, app);
    Ok(WopiSession { action_url, access_token, access_token_ttl, wopi_src: src })
}

/// The WOPI endpoint of a file.
pub fn wopi_src(base: &str, file: ObjectId) -> String {
    format!("{base}/wopi/files/{file}")
}

/// A signed token and its expiry in milliseconds since the epoch.
fn issue_token(ctx: &Context, user: &UserRow, file: ObjectId, edit: bool, app: Option<Uuid>) -> (String, i64) {
    let now = now_ms() / 1000;
    let exp = now + TOKEN_LIFETIME.as_secs() as i64;
    let claims = WopiClaims {
        sub: user.id,
        jti: Uuid::new_v4(),
        obj: file,
        edit,
        app,
        iat: now,
        exp,
        typ: TokenType::Wopi,
        user_version: user.claims_changed_at,
    };
    (ctx.tokens().sign(&claims), exp * 1000)
}

/// A WOPI request's verified access: whose token, to which file, with what mode.
pub struct WopiAccess {
    pub claims: WopiClaims,
    pub user: ActiveUser,
    pub file: Readable,
}

/// A WOPI request as the host received it: the token, the URL the client called (for the
/// proof) and its proof headers.
pub struct WopiRequest<'a> {
    pub token: &'a str,
    pub url: &'a str,
    pub proof: &'a wopi_apps::Proof,
}

/// Checks a WOPI request on file `file_id`, again on every request: the token must verify, name
/// this file, belong to an active user who is not banned, the file must still be there (not
/// trashed) and reachable by that user with the token's mode, and a session opened with an
/// application needs that application's proof. A refusal of the token is 401 (WOPI's "invalid
/// access token"); a file gone is 404; a proof refused is 500, as the WOPI specification says.
pub async fn authorise(ctx: &Context, request: &WopiRequest<'_>, file_id: ObjectId) -> ServiceResult<WopiAccess> {
    let claims = ctx.tokens().verify_wopi(request.token).map_err(token_error)?;
    if let Some(app) = claims.app {
        wopi_apps::check_request(ctx, app, request.proof, request.token, request.url).await?;
    }
    if claims.obj != file_id {
        return Err(ServiceError::new(
            ErrorKind::Unauthorized,
            codes::AUTH_INVALID_TOKEN,
            "this access token is for another file",
        ));
    }
    // A WOPI client takes every refusal of its token as 401 (WOPI's "invalid access token"),
    // an account no longer active included.
    let user = accounts::credential_holder(ctx, claims.sub, claims.user_version).await.map_err(|err| {
        if err.code == codes::AUTH_USER_INACTIVE || err.code == codes::AUTH_USER_NOT_FOUND {
            ServiceError::token_revoked("the token's user is no longer active")
        } else {
            err
        }
    })?;
    let file = if claims.edit {
        access::writable(ctx, claims.sub, file_id, Reach::Live).await?.as_readable().clone()
    } else {
        access::readable(ctx, claims.sub, file_id, Reach::Live).await?
    };
    expect_file(file.row())?;
    Ok(WopiAccess { claims, user, file })
}

impl WopiAccess {
    fn require_edit(&self) -> Result<(), WopiRefusal> {
        if self.claims.edit {
            Ok(())
        } else {
            Err(ServiceError::new(
                ErrorKind::Unauthorized,
                codes::WOPI_READ_ONLY,
                "this access token may only view the file",
            )
            .into())
        }
    }

    fn id(&self) -> ObjectId {
        self.file.id()
    }
}

/// A refusal in WOPI's own terms: the lock answers carry the current lock, the name answers
/// the reason or a name that would do.
#[derive(Debug)]
pub enum WopiRefusal {
    /// 409: the file is locked by another lock id, or not locked (`current` empty).
    LockMismatch {
        current: String,
        reason: &'static str,
    },
    /// 400 with `X-WOPI-InvalidFileNameError`.
    InvalidName(String),
    /// 409 with `X-WOPI-ValidRelativeTarget` (and `X-WOPI-Lock` when the taken file is locked).
    TargetExists {
        valid: String,
        lock: Option<String>,
    },
    Service(ServiceError),
}

impl From<ServiceError> for WopiRefusal {
    fn from(err: ServiceError) -> Self {
        Self::Service(err)
    }
}

impl From<nubo_model::db::DbError> for WopiRefusal {
    fn from(err: nubo_model::db::DbError) -> Self {
        Self::Service(err.into())
    }
}

impl From<nubo_model::kv::StoreError> for WopiRefusal {
    fn from(err: nubo_model::kv::StoreError) -> Self {
        Self::Service(err.into())
    }
}

pub type WopiResult<T> = Result<T, WopiRefusal>;

fn mismatch(current: Option<String>, reason: &'static str) -> WopiRefusal {
    WopiRefusal::LockMismatch { current: current.unwrap_or_default(), reason }
}

/// The file's version: its content's blob, which every content change replaces.
pub fn version_of(row: &ObjectRow) -> String {
    row.physical_file_id.clone().unwrap_or_else(|| row.updated_at.to_string())
}

/// What `CheckFileInfo` answers (the WOPI property names).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "PascalCase")]
pub struct CheckFileInfo {
    pub base_file_name: String,
    pub owner_id: String,
    pub size: i64,
    pub user_id: String,
    pub version: String,
    pub user_friendly_name: String,
    pub user_can_write: bool,
    pub user_can_rename: bool,
    pub user_can_not_write_relative: bool,
    pub read_only: bool,
    pub supports_locks: bool,
    pub supports_get_lock: bool,
    pub supports_extended_lock_length: bool,
    pub supports_update: bool,
    pub supports_rename: bool,
    pub supports_delete_file: bool,
    pub is_anonymous_user: bool,
    pub file_extension: String,
    /// ISO 8601 (UTC).
    pub last_modified_time: String,
    /// The origin of the page that embeds the WOPI client (the site), for its `postMessage`s.
    pub post_message_origin: String,
    pub breadcrumb_brand_name: String,
}

/// `CheckFileInfo`. `base` is the site address (its origin is `PostMessageOrigin`).
pub fn check_file_info(access: &WopiAccess, base: &str) -> CheckFileInfo {
    let row = access.file.row();
    let edit = access.claims.edit;
    CheckFileInfo {
        base_file_name: row.name.clone(),
        owner_id: Uuid::from(row.owner_id).to_string(),
        size: row.size,
        user_id: access.claims.sub.to_string(),
        version: version_of(row),
        user_friendly_name: access.user.row().nickname.clone(),
        user_can_write: edit,
        user_can_rename: edit,
        user_can_not_write_relative: !edit,
        read_only: !edit,
        supports_locks: true,
        supports_get_lock: true,
        supports_extended_lock_length: true,
        supports_update: true,
        supports_rename: true,
        supports_delete_file: true,
        is_anonymous_user: false,
        file_extension: extension(&row.name).to_owned(),
        last_modified_time: to_rfc3339(row.updated_at),
        post_message_origin: origin(base),
        breadcrumb_brand_name: "Nubo".to_owned(),
    }
}

/// `scheme://host[:port]` of an absolute address.
fn origin(base: &str) -> String {
    match base.find("://") {
        Some(at) => {
            let rest = &base[at + 3..];
            let end = rest.find('/').map_or(base.len(), |slash| at + 3 + slash);
            base[..end].to_owned()
        }
        None => base.to_owned(),
    }
}

/// The extension of `name` with its dot (`.docx`), or empty.
fn extension(name: &str) -> &str {
    match name.rfind('.') {
        Some(0) | None => "",
        Some(dot) => &name[dot..],
    }
}

/// `name` without its extension.
fn stem(name: &str) -> &str {
    &name[..name.len() - extension(name).len()]
}

/// `GetFile`: the content, streamed, and its version.
pub async fn get_file(ctx: &Context, access: &WopiAccess) -> ServiceResult<(Download, String)> {
    let download = downloads::open_streamed(ctx, &access.file).await?;
    Ok((download, version_of(access.file.row())))
}

fn lock_key(file: ObjectId) -> String {
    format!("wopi-lock:{file}")
}

/// A lock id as the client sent it: 1 to [`MAX_LOCK_LENGTH`] characters.
fn checked_lock(lock: Option<&str>) -> WopiResult<&str> {
    match lock {
        Some(lock) if !lock.is_empty() && lock.len() <= MAX_LOCK_LENGTH => Ok(lock),
        _ => Err(ServiceError::new(
            ErrorKind::BadRequest,
            codes::WOPI_BAD_LOCK,
            "X-WOPI-Lock must hold a lock id of 1 to 1024 characters",
        )
        .into()),
    }
}

/// The file's current lock, if any.
pub async fn current_lock(ctx: &Context, access: &WopiAccess) -> ServiceResult<Option<String>> {
    Ok(ctx.store().get(&lock_key(access.id())).await?)
}

/// `Lock`: takes the lock, or refreshes it when the file holds the same one already.
pub async fn lock(ctx: &Context, access: &WopiAccess, lock: Option<&str>) -> WopiResult<()> {
    access.require_edit()?;
    let lock = checked_lock(lock)?;
    let key = lock_key(access.id());
    // A lock that expires between the two steps leaves room to try again.
    for _ in 0..3 {
        if ctx.store().set_if_absent(&key, lock, LOCK_LIFETIME).await? {
            return Ok(());
        }
        match ctx.store().swap_if(&key, lock, Some((lock, LOCK_LIFETIME))).await? {
            Some(current) if current == lock => return Ok(()),
            Some(current) => return Err(mismatch(Some(current), "the file is locked by another lock id")),
            None => continue,
        }
    }
    Err(ServiceError::new(ErrorKind::Unavailable, codes::STORE_UNAVAILABLE, "the lock kept changing, try again").into())
}

/// Swaps the file's lock `expected` for `replacement` (none: unlocks); 409 with the current
/// lock when the file holds another one, or none.
async fn swap(ctx: &Context, access: &WopiAccess, expected: &str, replacement: Option<&str>) -> WopiResult<()> {
    let key = lock_key(access.id());
    let before = ctx.store().swap_if(&key, expected, replacement.map(|lock| (lock, LOCK_LIFETIME))).await?;
    match before {
        Some(current) if current == expected => Ok(()),
        Some(current) => Err(mismatch(Some(current), "the file is locked by another lock id")),
        None => Err(mismatch(None, "the file is not locked")),
    }
}

/// `RefreshLock`: the lock lives another [`LOCK_LIFETIME`].
pub async fn refresh_lock(ctx: &Context, access: &WopiAccess, lock: Option<&str>) -> WopiResult<()> {
    access.require_edit()?;
    let lock = checked_lock(lock)?;
    swap(ctx, access, lock, Some(lock)).await
}

/// `Unlock`.
pub async fn unlock(ctx: &Context, access: &WopiAccess, lock: Option<&str>) -> WopiResult<()> {
    access.require_edit()?;
    let lock = checked_lock(lock)?;
    swap(ctx, access, lock, None).await
}

/// `UnlockAndRelock`: replaces lock `old` with `new` in one step.
pub async fn unlock_and_relock(ctx: &Context, access: &WopiAccess, new: Option<&str>, old: &str) -> WopiResult<()> {
    access.require_edit()?;
    let new = checked_lock(new)?;
    let old = checked_lock(Some(old))?;
    swap(ctx, access, old, Some(new)).await
}

/// Whether a change of the file under `lock` (the request's `X-WOPI-Lock`) may go ahead: a
/// locked file needs its lock; an unlocked one takes the change only when `unlocked_ok`.
async fn check_lock(ctx: &Context, file: ObjectId, lock: Option<&str>, unlocked_ok: bool) -> WopiResult<()> {
    match ctx.store().get(&lock_key(file)).await? {
        Some(current) if Some(current.as_str()) == lock => Ok(()),
        Some(current) => Err(mismatch(Some(current), "the file is locked by another lock id")),
        None if unlocked_ok => Ok(()),
        None => Err(mismatch(None, "the file is not locked")),
    }
}

/// `PutFile`: new content for a file locked with `lock` (an unlocked file only while it is
/// empty, as after `editnew`), streamed through the common write path: `max_size` (413), the
/// quota (507), the old content in place until the new one is complete. Answers the new version.
pub async fn put_file(
    ctx: &Context,
    access: &WopiAccess,
    lock: Option<&str>,
    declared: Option<u64>,
    body: ByteStream,
) -> WopiResult<String> {
    access.require_edit()?;
    check_lock(ctx, access.id(), lock, access.file.row().size == 0).await?;
    writes::replace_content(ctx, access.claims.sub, access.id(), declared, body).await?;
    let row = db::objects::find_by_id(ctx.db(), access.id()).await?.ok_or_else(access::not_found)?;
    Ok(version_of(&row))
}

/// Where `PutRelativeFile` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelativeTarget {
    /// A name (or, starting with a dot, an extension for the file's own name) the host may
    /// change to one that is free.
    Suggested(String),
    /// Exactly this name; an existing file of that name is replaced only with `overwrite`.
    Exact { name: String, overwrite: bool },
}

/// The new file of a `PutRelativeFile`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "PascalCase")]
pub struct RelativeFile {
    pub name: String,
    /// The new file's WOPI endpoint with an access token for it.
    pub url: String,
}

/// `PutRelativeFile`: writes the body as a file beside this one (same folder, same owner).
pub async fn put_relative(
    ctx: &Context,
    access: &WopiAccess,
    target: RelativeTarget,
    declared: Option<u64>,
    body: ByteStream,
    base: &str,
) -> WopiResult<RelativeFile> {
    access.require_edit()?;
    let row = access.file.row();
    let parent = row.parent_id.ok_or_else(access::not_found)?;
    let owner = access.claims.sub;
    let group = access.user.group_id();
    let written = match target {
        RelativeTarget::Suggested(suggested) => {
            let wanted = if suggested.starts_with('.') { format!("{}{suggested}", stem(&row.name)) } else { suggested };
            let name = ObjectName::parse(&wanted).map_err(|why| WopiRefusal::InvalidName(why.to_string()))?;
            let name = files::free_name(ctx.db(), parent, &name).await?;
            writes::create_file(ctx, owner, group, (parent, name.as_str()), declared, body).await?
        }
        RelativeTarget::Exact { name, overwrite } => {
            let name = ObjectName::parse(&name).map_err(|why| WopiRefusal::InvalidName(why.to_string()))?;
            match db::objects::child_by_name(ctx.db(), parent, name.as_str()).await? {
                None => writes::create_file(ctx, owner, group, (parent, name.as_str()), declared, body)
                    .await
                    .map_err(|err| taken_or(err, name.as_str()))?,
                Some(existing) => {
                    let lock = ctx.store().get(&lock_key(existing.id)).await?;
                    if !overwrite || lock.is_some() || existing.is_folder() {
                        let valid = files::free_name(ctx.db(), parent, &name).await?.as_str().to_owned();
                        return Err(WopiRefusal::TargetExists { valid, lock });
                    }
                    writes::replace_content(ctx, owner, existing.id, declared, body).await?
                }
            }
        }
    };
    let (token, _) = issue_token(ctx, access.user.row(), written.id.into(), true, access.claims.app);
    let url = format!("{}?access_token={token}", wopi_src(base, written.id.into()));
    Ok(RelativeFile { name: written.name, url })
}

/// A name taken meanwhile (another request created it) reads as the taken target it is.
fn taken_or(err: ServiceError, name: &str) -> WopiRefusal {
    if err.code == codes::OBJECT_NAME_TAKEN {
        WopiRefusal::TargetExists { valid: format!("{} (1){}", stem(name), extension(name)), lock: None }
    } else {
        err.into()
    }
}

/// `RenameFile`: the file takes `requested` as its name, keeping its extension (WOPI sends
/// the name without it). A locked file needs its lock. Answers the new name without extension.
pub async fn rename(ctx: &Context, access: &WopiAccess, lock: Option<&str>, requested: &str) -> WopiResult<String> {
    access.require_edit()?;
    check_lock(ctx, access.id(), lock, true).await?;
    let name = format!("{requested}{}", extension(&access.file.row().name));
    let file = access::writable(ctx, access.claims.sub, access.id(), Reach::Live).await?;
    match files::rename(ctx, &file, &name).await {
        Ok(_) => Ok(requested.to_owned()),
        Err(err) if err.code == codes::OBJECT_NAME_TAKEN => {
            Err(WopiRefusal::InvalidName("a file of that name is already in the folder".to_owned()))
        }
        Err(err) if err.kind == ErrorKind::Validation => Err(WopiRefusal::InvalidName(err.message.into_owned())),
        Err(err) => Err(err.into()),
    }
}

/// `DeleteFile`: to the trash, unless the file is locked (409 with its lock).
pub async fn delete(ctx: &Context, access: &WopiAccess) -> WopiResult<()> {
    access.require_edit()?;
    if let Some(current) = current_lock(ctx, access).await? {
        return Err(mismatch(Some(current), "the file is locked"));
    }
    files::trash(ctx, access.claims.sub, &[access.id().into()]).await?;
    Ok(())
}

/// Decodes UTF-7 (RFC 2152), in which WOPI sends file names in headers; `None` when malformed.
pub fn decode_utf7(text: &str) -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '+' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'-') {
            chars.next();
            out.push('+');
            continue;
        }
        // A base64 run of UTF-16 code units, ended by any other character ('-' is absorbed).
        let (mut bits, mut count, mut units) = (0u32, 0u32, Vec::new());
        while let Some(&next) = chars.peek() {
            let Some(value) = ALPHABET.iter().position(|&b| char::from(b) == next) else { break };
            chars.next();
            bits = (bits << 6) | value as u32;
            count += 6;
            if count >= 16 {
                count -= 16;
                units.push((bits >> count) as u16);
                bits &= (1 << count) - 1;
            }
        }
        if chars.peek() == Some(&'-') {
            chars.next();
        }
        out.push_str(&String::from_utf16(&units).ok()?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf7_names_decode() {
        assert_eq!(decode_utf7("plain.docx").as_deref(), Some("plain.docx"));
        assert_eq!(decode_utf7("A+ImIDkQ.").as_deref(), Some("A\u{2262}\u{391}."));
        assert_eq!(decode_utf7("Hi Mom -+Jjo--!").as_deref(), Some("Hi Mom -\u{263a}-!"));
        assert_eq!(decode_utf7("+ZeVnLIqe-.docx").as_deref(), Some("\u{65e5}\u{672c}\u{8a9e}.docx"));
        assert_eq!(decode_utf7("1 +- 1").as_deref(), Some("1 + 1"));
    }

    #[test]
    fn names_split_into_stem_and_extension() {
        assert_eq!((stem("report.docx"), extension("report.docx")), ("report", ".docx"));
        assert_eq!((stem("a.tar.gz"), extension("a.tar.gz")), ("a.tar", ".gz"));
        assert_eq!((stem(".profile"), extension(".profile")), (".profile", ""));
        assert_eq!((stem("README"), extension("README")), ("README", ""));
    }

    #[test]
    fn the_origin_is_scheme_host_and_port() {
        assert_eq!(origin("https://cloud.example.com/sub"), "https://cloud.example.com");
        assert_eq!(origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }
}
