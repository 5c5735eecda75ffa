//! Redeem codes: administrators generate batches (codes from the OS's CSPRNG, shown once,
//! stored as SHA-256 hashes), list, disable and delete them; users redeem a code for a storage
//! pack or a temporary group. A redemption takes one use in one transaction with the user's
//! use row and what the code gives, so a code is never used past `uses_per_code`, nor twice by
//! one user, on either database or across masters. Wrong codes count against a failure budget
//! per user and per address in the `KvStore` (`sign_in::charge_guess`).
//!
//! Temporary groups: the user moves to the code's group and the group they were in is
//! recorded; a periodic job ([`end_temporary_groups`]) moves them back when the time is up.
//! Both moves raise the user's claims version, so tokens issued before refresh. Choices:
//! - an administrator who changes the user's group meanwhile decides: the temporary group is
//!   forgotten and the job leaves the user where the administrator put them;
//! - a second code for the same group extends the end by its duration; a code for another
//!   group while one is in force, or for the group the user is already in, is refused
//!   (`redeem.not_applicable`, no use taken);
//! - when the recorded group was deleted meanwhile, the user returns to the registration
//!   group.

use std::net::IpAddr;

use nubo_model::db::redeem::{BatchFields, CodeFilter, CodeRow, NewCode, TemporaryGroupRow};
use nubo_model::db::{self, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::time::{Millis, from_rfc3339, now_ms, to_rfc3339};
use rand::Rng;
use rand::TryRngCore;
use rand::rngs::OsRng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::capacity::storage_packs::{self, PackGrant, PackView};
use crate::context::Context;
use crate::credentials::revocation;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::{Page, PageRequest, identity::bootstrap, identity::sign_in};

/// The characters codes are made of: no 0/O, 1/I/L, so a code read aloud or copied by hand
/// survives.
pub const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Characters in a code: 20 of 31 is about 99 bits, beyond guessing under any rate limit.
pub const CODE_LENGTH: usize = 20;
/// Characters kept in the clear (the hint) so administrators can tell codes apart.
const HINT_LENGTH: usize = 4;
/// Codes in one batch at most.
pub const MAX_BATCH: i64 = 1000;
/// Uses of one code at most.
pub const MAX_USES: i64 = 1_000_000;

/// A new code from the OS's random number generator, in groups of four (`ABCD-EFGH-...`).
pub fn generate_code() -> String {
    let mut rng = OsRng.unwrap_err();
    let mut code = String::with_capacity(CODE_LENGTH + CODE_LENGTH / 4);
    for i in 0..CODE_LENGTH {
        if i > 0 && i % 4 == 0 {
            code.push('-');
        }
        code.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
    }
    code
}

/// A code as typed, normalised (upper case, spaces and dashes dropped); `None` when it cannot
/// be a code of ours.
pub fn normalise(input: &str) -> Option<String> {
    let code: String =
        input.chars().filter(|c| !c.is_whitespace() && *c != '-').map(|c| c.to_ascii_uppercase()).collect();
    let valid = code.len() == CODE_LENGTH && code.bytes().all(|b| ALPHABET.contains(&b));
    valid.then_some(code)
}

/// The stored form of a normalised code. A plain hash suffices: codes are high-entropy, so
/// nobody can search the hash for them, and lookups go by it.
pub fn hash(normalised: &str) -> String {
    format!("{:x}", Sha256::digest(normalised.as_bytes()))
}

/// What a code gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CodeKind {
    StoragePack,
    Group,
}

impl CodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CodeKind::StoragePack => "storage_pack",
            CodeKind::Group => "group",
        }
    }
}

/// A storage-pack code's pack.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PackPrize {
    /// Bytes the pack adds.
    #[schema(minimum = 1)]
    pub size: i64,
    /// How long the pack lasts once redeemed (1..=36500 days).
    #[schema(minimum = 1, maximum = 36500)]
    pub duration_days: i64,
}

/// A group code's temporary group.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupPrize {
    pub group_id: Uuid,
    /// How long the user stays in the group once redeemed (1..=36500 days).
    #[schema(minimum = 1, maximum = 36500)]
    pub duration_days: i64,
}

/// A batch to generate: `kind` names which of `storage_pack` and `group` is given.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    pub kind: CodeKind,
    /// Codes to generate (1..=1000).
    #[schema(minimum = 1, maximum = 1000)]
    pub count: i64,
    /// Users who may redeem each code (1..=1000000), each once.
    #[schema(minimum = 1, maximum = 1000000)]
    pub uses_per_code: i64,
    /// When the codes stop working (RFC 3339); absent: never.
    pub expires_at: Option<String>,
    /// A label for administrators (and the name of the packs the codes give), up to 100
    /// characters.
    #[schema(max_length = 100)]
    pub name: Option<String>,
    pub storage_pack: Option<PackPrize>,
    pub group: Option<GroupPrize>,
}

/// A code as administrators see it: never the code itself.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CodeView {
    pub id: Uuid,
    /// The code's first four characters.
    pub hint: String,
    pub batch_id: Uuid,
    pub name: String,
    pub kind: CodeKind,
    pub storage_pack: Option<PackPrize>,
    pub group: Option<GroupPrize>,
    pub uses_per_code: i64,
    /// Uses taken so far.
    pub used: i64,
    pub expires_at: Option<String>,
    pub disabled: bool,
    pub created_at: String,
}

/// A generated code, shown once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NewCodeView {
    pub id: Uuid,
    /// The code to hand out (`ABCD-EFGH-...`): it is not stored and cannot be shown again.
    pub code: String,
}

/// The answer to generating a batch.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchView {
    pub batch_id: Uuid,
    pub kind: CodeKind,
    pub name: String,
    pub uses_per_code: i64,
    pub expires_at: Option<String>,
    pub codes: Vec<NewCodeView>,
}

impl BatchView {
    /// The batch as CSV (one code a line), the download offered at creation.
    pub fn to_csv(&self) -> String {
        let name = self.name.replace('"', "\"\"");
        let mut csv = String::from("code,id,kind,name,uses_per_code,expires_at\r\n");
        for code in &self.codes {
            csv.push_str(&format!(
                "{},{},{},\"{}\",{},{}\r\n",
                code.code,
                code.id,
                self.kind.as_str(),
                name,
                self.uses_per_code,
                self.expires_at.as_deref().unwrap_or("")
            ));
        }
        csv
    }
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::REDEEM_NOT_FOUND, "no such redeem code")
}

fn kind_of(row: &CodeRow) -> CodeKind {
    if row.kind == "group" { CodeKind::Group } else { CodeKind::StoragePack }
}

fn view(row: &CodeRow) -> CodeView {
    let days = row.duration / 86_400;
    let kind = kind_of(row);
    CodeView {
        id: row.id,
        hint: row.hint.clone(),
        batch_id: row.batch_id,
        name: row.name.clone(),
        kind,
        storage_pack: row.pack_size.map(|size| PackPrize { size, duration_days: days }),
        group: row.group_id.map(|group| GroupPrize { group_id: group.into(), duration_days: days }),
        uses_per_code: row.uses_per_code,
        used: row.used,
        expires_at: row.expires_at.map(to_rfc3339),
        disabled: row.disabled_at.is_some(),
        created_at: to_rfc3339(row.created_at),
    }
}

/// Generates a batch of codes; each is shown once, in the answer.
pub async fn create_batch(ctx: &Context, admin: UserId, request: BatchRequest) -> ServiceResult<BatchView> {
    if !(1..=MAX_BATCH).contains(&request.count) {
        return Err(ServiceError::validation("count", format!("count must be from 1 to {MAX_BATCH}")));
    }
    if !(1..=MAX_USES).contains(&request.uses_per_code) {
        return Err(ServiceError::validation("uses_per_code", format!("uses_per_code must be from 1 to {MAX_USES}")));
    }
    let now = now_ms();
    let expires_at = match request.expires_at.as_deref() {
        Some(text) => {
            let at =
                from_rfc3339(text).ok_or_else(|| ServiceError::validation("expires_at", "must be an RFC 3339 time"))?;
            if at <= now {
                return Err(ServiceError::validation("expires_at", "must be in the future"));
            }
            Some(at)
        }
        None => None,
    };
    let name = request.name.as_deref().map(str::trim).unwrap_or_default().to_owned();
    if name.chars().count() > 100 {
        return Err(ServiceError::validation("name", "name must be at most 100 characters"));
    }
    let (pack_size, group_id, days) = match (request.kind, &request.storage_pack, &request.group) {
        (CodeKind::StoragePack, Some(pack), None) => {
            storage_packs::check_name_and_size("pack", pack.size)
                .map_err(|_| ServiceError::validation("storage_pack.size", "size must be at least 1 byte"))?;
            (Some(pack.size), None, pack.duration_days)
        }
        (CodeKind::Group, None, Some(group)) => {
            if db::groups::find(ctx.db(), group.group_id.into()).await?.is_none() {
                return Err(ServiceError::validation("group.group_id", "no such group"));
            }
            (None, Some(GroupId::from(group.group_id)), group.duration_days)
        }
        (CodeKind::StoragePack, _, _) => {
            return Err(ServiceError::validation(
                "storage_pack",
                "kind storage_pack takes storage_pack {size, duration_days} and no group",
            ));
        }
        (CodeKind::Group, _, _) => {
            return Err(ServiceError::validation(
                "group",
                "kind group takes group {group_id, duration_days} and no storage_pack",
            ));
        }
    };
    let duration = storage_packs::duration_ms("duration_days", days)? / 1000;
    let batch_id = Uuid::new_v4();
    let plain: Vec<(Uuid, String)> = (0..request.count).map(|_| (Uuid::new_v4(), generate_code())).collect();
    let stored: Vec<(Uuid, String, String)> = plain
        .iter()
        .map(|(id, code)| {
            let normalised = normalise(code).unwrap_or_default();
            (*id, hash(&normalised), normalised[..HINT_LENGTH].to_owned())
        })
        .collect();
    let rows: Vec<NewCode<'_>> =
        stored.iter().map(|(id, code_hash, hint)| NewCode { id: *id, code_hash, hint }).collect();
    let batch = BatchFields {
        batch_id,
        name: &name,
        kind: request.kind.as_str(),
        pack_size,
        group_id,
        duration,
        uses_per_code: request.uses_per_code,
        expires_at,
        created_by: admin.as_uuid(),
    };
    db::redeem::insert_batch(ctx.db(), &batch, &rows, now).await?;
    Ok(BatchView {
        batch_id,
        kind: request.kind,
        name,
        uses_per_code: request.uses_per_code,
        expires_at: expires_at.map(to_rfc3339),
        codes: plain.into_iter().map(|(id, code)| NewCodeView { id, code }).collect(),
    })
}

pub async fn list(
    ctx: &Context,
    batch_id: Option<Uuid>,
    kind: Option<CodeKind>,
    page: PageRequest,
) -> ServiceResult<Page<CodeView>> {
    let filter = CodeFilter { batch_id, kind: kind.map(|k| k.as_str().to_owned()) };
    let (count, rows) = db::redeem::list(ctx.db(), &filter, page.offset, page.limit).await?;
    Ok(Page { count, items: rows.iter().map(view).collect() })
}

/// Disables or enables a code.
pub async fn set_disabled(ctx: &Context, id: Uuid, disabled: bool) -> ServiceResult<CodeView> {
    let current = db::redeem::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    // Disabling keeps the first time it was disabled.
    let at = match (disabled, current.disabled_at) {
        (true, Some(at)) => Some(at),
        (true, None) => Some(now_ms()),
        (false, _) => None,
    };
    db::redeem::set_disabled(ctx.db(), id, at).await?;
    let row = db::redeem::find(ctx.db(), id).await?.ok_or_else(not_found)?;
    Ok(view(&row))
}

/// Deletes a code; what it gave (packs, temporary groups) stays.
pub async fn delete(ctx: &Context, id: Uuid) -> ServiceResult<()> {
    if !db::redeem::delete(ctx.db(), id).await? {
        return Err(not_found());
    }
    Ok(())
}

/// A temporary group as the redeeming user sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TemporaryGroupView {
    pub group_id: Uuid,
    pub group_name: String,
    /// When the user returns to `previous_group_id`.
    pub ends_at: String,
    pub previous_group_id: Option<Uuid>,
}

/// What a redeemed code gave: `storage_pack` or `group`, by `kind`. After a group code the
/// caller's access token is stale: refresh it (`POST /user/session/refresh`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RedeemedView {
    pub kind: CodeKind,
    pub storage_pack: Option<PackView>,
    pub group: Option<TemporaryGroupView>,
}

fn invalid_code() -> ServiceError {
    ServiceError::new(
        ErrorKind::NotFound,
        codes::REDEEM_INVALID_CODE,
        "no such code, or it was disabled or has expired: check what you typed",
    )
}

fn not_applicable(message: &'static str) -> ServiceError {
    ServiceError::conflict(codes::REDEEM_NOT_APPLICABLE, message)
}

/// Redeems `code` for `user`, from `address`.
pub async fn redeem(ctx: &Context, user: UserId, code: &str, address: IpAddr) -> ServiceResult<RedeemedView> {
    let config = ctx.config();
    let budget = [
        (format!("rate:redeem:user:{user}"), config.redeem_failures_per_user),
        (format!("rate:redeem:addr:{address}"), config.redeem_failures_per_address),
    ];
    if !sign_in::charge_guess(ctx, &budget, sign_in::failure_window(ctx)).await? {
        return Err(ServiceError::new(
            ErrorKind::RateLimited,
            codes::REDEEM_RATE_LIMITED,
            "too many wrong codes, try again later",
        ));
    }
    let now = now_ms();
    let found = match normalise(code) {
        Some(normalised) => db::redeem::find_by_hash(ctx.db(), &hash(&normalised)).await?,
        None => None,
    };
    let usable = |row: &CodeRow| row.disabled_at.is_none() && row.expires_at.is_none_or(|end| end > now);
    let Some(row) = found.filter(usable) else {
        return Err(invalid_code());
    };
    // A real code was guessed right: its charge comes back, whatever happens next.
    sign_in::refund_guess(ctx, &budget).await?;
    let mut tx = ctx.db().begin().await?;
    if !db::redeem::record_use(&mut tx, row.id, user, now).await? {
        return Err(ServiceError::conflict(codes::REDEEM_ALREADY_USED, "you have redeemed this code already"));
    }
    if !db::redeem::take_use(&mut tx, row.id, now).await? {
        return Err(ServiceError::conflict(codes::REDEEM_USED_UP, "every use of this code is taken"));
    }
    // The code's hint and batch name only: never the code.
    let used = Activity::by(user, Action::Redeem).on(TargetKind::Redeem, row.id, Some(&row.name)).from(address);
    activity::record_in(&mut tx, used.with("kind", kind_of(&row)).with("hint", &row.hint)).await;
    let duration_ms = row.duration * 1000;
    let answer = match (kind_of(&row), row.pack_size, row.group_id) {
        (CodeKind::StoragePack, Some(size), _) => {
            let name = if row.name.is_empty() { "Redeemed code".to_owned() } else { row.name.clone() };
            let grant = PackGrant {
                user_id: user,
                name,
                size,
                starts_at: now,
                expires_at: Some(now + duration_ms),
                granted_by: None,
                redeem_code_id: Some(row.id),
            };
            let id = storage_packs::grant_on(&mut tx, &grant, now).await?;
            tx.commit().await.map_err(DbError::from)?;
            RedeemedView {
                kind: CodeKind::StoragePack,
                storage_pack: Some(storage_packs::get(ctx, id).await?),
                group: None,
            }
        }
        (CodeKind::Group, _, Some(group_id)) => {
            let (current, temporary) = db::redeem::group_standing(&mut tx, user).await?;
            let (ends_at, previous, version) = match temporary {
                Some(held) if held.group_id == group_id => {
                    let new_end = held.ends_at.max(now) + duration_ms;
                    if !db::redeem::extend_temporary(&mut tx, user, group_id, held.ends_at, new_end).await? {
                        return Err(not_applicable("your group changed meanwhile: try again"));
                    }
                    (new_end, held.previous_group_id, None)
                }
                Some(_) => {
                    return Err(not_applicable(
                        "a temporary group of another group is in force: redeem this code when it ends",
                    ));
                }
                None if current == group_id => return Err(not_applicable("you are in this group already")),
                None => {
                    let ends_at = now + duration_ms;
                    let held = TemporaryGroupRow {
                        user_id: user,
                        group_id,
                        previous_group_id: Some(current),
                        starts_at: now,
                        ends_at,
                        redeem_code_id: Some(row.id.to_string()),
                    };
                    db::redeem::insert_temporary(&mut tx, &held).await?;
                    let version = db::redeem::move_user(&mut tx, user, (current, group_id), now)
                        .await?
                        .ok_or_else(|| not_applicable("your group changed meanwhile: try again"))?;
                    (ends_at, Some(current), Some(version))
                }
            };
            tx.commit().await.map_err(DbError::from)?;
            if let Some(version) = version {
                revocation::user_claims_changed(ctx.store(), user, version).await?;
            }
            let group_name = db::groups::find(ctx.db(), group_id).await?.map(|g| g.name).unwrap_or_default();
            let group = TemporaryGroupView {
                group_id: group_id.into(),
                group_name,
                ends_at: to_rfc3339(ends_at),
                previous_group_id: previous.map(Into::into),
            };
            RedeemedView { kind: CodeKind::Group, storage_pack: None, group: Some(group) }
        }
        _ => return Err(ServiceError::internal(anyhow::anyhow!("redeem code {} lacks what it gives", row.id))),
    };
    Ok(answer)
}

/// The caller's temporary group, if one is in force.
pub async fn temporary_group_of(ctx: &Context, user: UserId) -> ServiceResult<Option<TemporaryGroupView>> {
    let Some(held) = db::redeem::temporary_group_of(ctx.db(), user).await? else { return Ok(None) };
    let group_name = db::groups::find(ctx.db(), held.group_id).await?.map(|g| g.name).unwrap_or_default();
    Ok(Some(TemporaryGroupView {
        group_id: held.group_id.into(),
        group_name,
        ends_at: to_rfc3339(held.ends_at),
        previous_group_id: held.previous_group_id.map(Into::into),
    }))
}

/// Ends the temporary groups whose time is up by `now` (the periodic job): each user returns
/// to the group recorded (the registration group when that one was deleted) if they are still
/// in the temporary one, and their tokens refresh. Safe on several masters at once: the row is
/// taken by a conditional delete in the move's transaction. Answers how many ended.
pub async fn end_temporary_groups(ctx: &Context, now: Millis) -> ServiceResult<usize> {
    let mut ended = 0;
    loop {
        let due = db::redeem::ended_temporary(ctx.db(), now, 100).await?;
        if due.is_empty() {
            return Ok(ended);
        }
        let mut progressed = false;
        for held in &due {
            let back = match held.previous_group_id {
                Some(group) => group,
                None => bootstrap::registration_group(ctx).await?,
            };
            let mut tx = ctx.db().begin().await?;
            if !db::redeem::take_ended(&mut tx, held).await? {
                continue;
            }
            progressed = true;
            let version = db::redeem::move_user(&mut tx, held.user_id, (held.group_id, back), now).await?;
            tx.commit().await.map_err(DbError::from)?;
            ended += 1;
            if let Some(version) = version {
                revocation::user_claims_changed(ctx.store(), held.user_id, version).await?;
            }
        }
        if !progressed {
            return Ok(ended);
        }
    }
}
