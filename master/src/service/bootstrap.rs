//! What an empty database needs before anyone can use it: the administrators' group and the
//! default group for registrations.

use uuid::Uuid;

use crate::db::{self, Db};
use crate::domain::group::{GIB, GroupPermissions};
use crate::domain::time::now_ms;
use crate::service::ServiceResult;

pub const ADMIN_GROUP_NAME: &str = "Administrators";
pub const USER_GROUP_NAME: &str = "Users";

/// Seeds the built-in groups when no group exists yet; a no-op afterwards, so administrators
/// may rename or reshape them freely.
pub async fn seed(db: &Db) -> ServiceResult<()> {
    if db::groups::count(db).await? > 0 {
        return Ok(());
    }
    let admin_id = Uuid::new_v4().to_string();
    let user_id = Uuid::new_v4().to_string();
    let all = serde_json::to_string(&GroupPermissions::all())
        .map_err(crate::service::ServiceError::internal)?;
    let users = serde_json::to_string(&GroupPermissions {
        share: true,
        webdav: true,
        external_download: false,
    })
    .map_err(crate::service::ServiceError::internal)?;
    let groups = [
        db::groups::NewGroup {
            id: &admin_id,
            name: ADMIN_GROUP_NAME,
            is_admin: true,
            max_storage: 1024 * GIB,
            permissions: &all,
        },
        db::groups::NewGroup {
            id: &user_id,
            name: USER_GROUP_NAME,
            is_admin: false,
            max_storage: GIB,
            permissions: &users,
        },
    ];
    match db::groups::insert_all(db, &groups, now_ms()).await {
        Ok(()) => Ok(()),
        // Another master seeded at the same moment: theirs stands.
        Err(db::DbError::Sqlx(e)) if db::is_unique_violation(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
