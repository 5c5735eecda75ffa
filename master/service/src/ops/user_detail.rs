//! The user as administrators inspect them: the profile, storage, packs, ways to sign in and
//! what they own, gathered from every context that holds a part.

use nubo_model::db;
use nubo_model::domain::ids::UserId;
use nubo_model::domain::time::now_ms;
use serde::Serialize;
use utoipa::ToSchema;

use crate::capacity::storage_packs::{self, PackView};
use crate::context::Context;
use crate::error::ServiceResult;
use crate::identity::accounts::{self, UserView};
use crate::identity::identities::{self, IdentityView};
use crate::identity::users;

/// A user as administrators inspect them: the profile, storage, ways to sign in and what they
/// own.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UserDetail {
    #[serde(flatten)]
    pub user: UserView,
    pub usage: StorageUsage,
    /// Every storage pack of the user's, active or not, newest first.
    pub packs: Vec<PackView>,
    /// Ways to sign in (e-mail and password, OAuth providers): provider and display name, never
    /// a credential.
    pub identities: Vec<IdentityView>,
    /// Passkeys registered (their names are the user's own business).
    pub passkeys: i64,
    pub counts: OwnedCounts,
}

/// Bytes used (uploads in progress included) and the capacity (the group's storage plus any
/// active storage packs).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StorageUsage {
    pub used: i64,
    pub capacity: i64,
}

/// What the user owns outside the trash (the root folder not counted).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OwnedCounts {
    pub files: i64,
    pub folders: i64,
    pub shares: i64,
}

pub async fn detail(ctx: &Context, id: UserId) -> ServiceResult<UserDetail> {
    let db = ctx.db();
    let row = db::users::find(db, id).await?.ok_or_else(users::not_found)?;
    let user = accounts::user_view(ctx, &row).await?;
    let (used, capacity) = db::users::usage_and_capacity(db, id, now_ms()).await?;
    let identities = identities::list(ctx, id).await?;
    let passkeys = db::passkeys::list_of(db, id).await?.len() as i64;
    let (files, folders, shares) = db::summary::user_counts(db, id).await?;
    let packs = storage_packs::list_mine(ctx, id).await?;
    Ok(UserDetail {
        user,
        usage: StorageUsage { used, capacity },
        packs,
        identities,
        passkeys,
        counts: OwnedCounts { files, folders, shares },
    })
}
