//! What an empty database needs before anyone can use it: the administrators' group, the
//! default group for registrations, and the first administrator.

use nubo_model::config::Config;
use nubo_model::db::groups::GroupValues;
use nubo_model::db::policies::PolicyValues;
use nubo_model::db::{self, Db};
use nubo_model::domain::group::{GIB, GroupPermissions};
use nubo_model::domain::ids::{GroupId, PolicyId};
use nubo_model::domain::object::search_key;
use nubo_model::domain::policy::{DEFAULT_CHUNK_SIZE, LocalOptions, PolicyOptions};
use nubo_model::domain::time::now_ms;

use crate::context::Context;
use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;
use crate::identity::providers::password::EMAIL_PASSWORD;
use crate::{identity::accounts, settings::site, storage::policies};

pub const ADMIN_GROUP_NAME: &str = "Administrators";
pub const USER_GROUP_NAME: &str = "Users";
/// The local-disk policy (`<data_dir>/uploads`) both seeded groups start with.
pub const DEFAULT_POLICY_NAME: &str = "Local disk";
/// Setting naming the group new registrations join.
pub const REGISTRATION_GROUP_SETTING: &str = "register_default_group";

/// Seeds the built-in groups when no group exists yet; a no-op afterwards, so administrators
/// may rename or reshape them freely.
pub async fn seed(db: &Db) -> ServiceResult<()> {
    if db::groups::count(db).await? > 0 {
        return Ok(());
    }
    let admin_id = GroupId::random();
    let user_id = GroupId::random();
    let groups = [
        (
            admin_id,
            GroupValues {
                name: ADMIN_GROUP_NAME,
                is_admin: true,
                max_storage: 1024 * GIB,
                permissions: GroupPermissions::all(),
                trash_retention_days: 30,
                version_max_count: 10,
                version_max_days: 30,
            },
        ),
        (
            user_id,
            GroupValues {
                name: USER_GROUP_NAME,
                is_admin: false,
                max_storage: GIB,
                permissions: GroupPermissions { share: true, webdav: true, external_download: false, share_save: true },
                trash_retention_days: 30,
                version_max_count: 10,
                version_max_days: 30,
            },
        ),
    ];
    match db::groups::insert_all(db, &groups, now_ms()).await {
        Ok(()) => {}
        // Another master seeded at the same moment: theirs stands.
        Err(e) if e.is_unique_violation() => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let policy_id = PolicyId::random();
    let options = PolicyOptions::Local(LocalOptions { root: "uploads".to_owned(), ..LocalOptions::default() });
    let policy = PolicyValues {
        name: DEFAULT_POLICY_NAME,
        max_size: 0,
        is_private: true,
        chunk_size: DEFAULT_CHUNK_SIZE,
        options: &options,
        dir_name_rule: policies::DEFAULT_DIR_RULE,
        file_name_rule: policies::DEFAULT_FILE_RULE,
        node_id: None,
    };
    db::policies::insert(db, policy_id, &policy, now_ms()).await?;
    let policy_ids = [policy_id];
    db::groups::set_policies(db, admin_id, &policy_ids).await?;
    db::groups::set_policies(db, user_id, &policy_ids).await?;
    let mut values = serde_json::Map::new();
    values.insert(REGISTRATION_GROUP_SETTING.into(), user_id.to_string().into());
    site::update_settings(db, &values).await
}

/// The group registrations join: the one named by the setting, else the seeded users' group.
pub async fn registration_group(ctx: &Context) -> ServiceResult<GroupId> {
    let db = ctx.db();
    if let Some(id) = site::current(ctx).await?.register_default_group
        && db::groups::find(db, id).await?.is_some()
    {
        return Ok(id);
    }
    match db::groups::find_by_name(db, USER_GROUP_NAME).await? {
        Some(group) => Ok(group.id),
        None => Err(ServiceError::new(
            ErrorKind::Unavailable,
            codes::USER_NO_REGISTRATION_GROUP,
            "no group is configured for new users",
        )),
    }
}

/// On a database without users, creates the first administrator from `admin_email` and
/// `admin_password`, generating (and logging once) a password when none is configured.
pub async fn seed_first_admin(db: &Db, config: &Config) -> ServiceResult<()> {
    if db::users::count(db).await? > 0 {
        return Ok(());
    }
    let (password, generated) = match &config.admin_password {
        Some(password) => (password.clone(), false),
        None => (crate::credentials::password::generate_password(), true),
    };
    match accounts::create_admin(db, &config.admin_email, &password).await {
        Ok(id) => {
            if generated {
                // The web app asks whoever signs in with it to choose another.
                db::users::mark_credential_generated(db, id.into(), EMAIL_PASSWORD).await?;
                tracing::warn!(
                    email = %config.admin_email,
                    "created the first administrator {} with the generated password {} (shown once: change it)",
                    config.admin_email,
                    password.expose()
                );
            } else {
                tracing::info!(email = %config.admin_email, %id, "created the first administrator");
            }
            Ok(())
        }
        // Another master created it concurrently.
        Err(e) if e.kind == ErrorKind::Conflict => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the search key of every object that has none (rows from before keys existed), a
/// thousand per transaction; answers how many. Every object written since carries its key.
pub async fn fill_search_keys(db: &Db) -> ServiceResult<u64> {
    let mut filled = 0;
    loop {
        let batch = db::objects::without_search_key(db, 1000).await?;
        if batch.is_empty() {
            return Ok(filled);
        }
        let keys: Vec<_> = batch.into_iter().map(|(id, name)| (id, search_key(&name))).collect();
        db::objects::set_search_keys(db, &keys).await?;
        filled += keys.len() as u64;
    }
}
