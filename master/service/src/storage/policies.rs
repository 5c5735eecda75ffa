//! Storage policies: administrators' CRUD with a connection test, the policies a group may use,
//! and the check that a caller may use a policy.

use nubo_model::db::policies::{PolicyRow, PolicyValues};
use nubo_model::db::{self, Db, DbError};
use nubo_model::domain::activity::{Action, TargetKind};
use nubo_model::domain::ids::{GroupId, UserId};
use nubo_model::domain::ids::{NodeId, PolicyId};
use nubo_model::domain::naming;
use nubo_model::domain::policy::{
    DEFAULT_CHUNK_SIZE, LocalOptions, PolicyOptions, PolicyType, S3Options, validate_chunk_size,
};
use nubo_model::domain::time::now_ms;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::activity::{self, Activity};
use crate::context::Context;
use crate::error_codes as codes;
use std::sync::Arc;

use nubo_common::storage::BlobStore;

use crate::error::{ErrorKind, ServiceError, ServiceResult};

/// A policy as administrators see it; the S3 secret key is never included.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyView {
    pub id: Uuid,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: PolicyType,
    /// Largest file in bytes; 0 means no limit.
    pub max_size: i64,
    /// true: downloads are streamed by Nubo; false: answered with a redirect to a URL valid 15
    /// minutes (presigned S3, a signed node URL, or for local disk a signed `/api/v1/file/blob/`).
    pub is_private: bool,
    pub chunk_size: i64,
    /// `LocalOptions` or `S3Options`, with `secret_key` blanked and `has_secret_key` added.
    pub options: serde_json::Value,
    pub dir_name_rule: String,
    pub file_name_rule: String,
    /// The storage node that keeps the files (a `local` policy on that node's disk); absent
    /// when the master stores them itself.
    pub node_id: Option<Uuid>,
}

/// A policy as its users see it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicySummary {
    pub id: Uuid,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: PolicyType,
    pub max_size: i64,
    pub chunk_size: i64,
}

/// A policy as administrators write it.
#[derive(Debug, Clone)]
pub struct PolicyInput {
    pub name: String,
    pub kind: PolicyType,
    pub max_size: i64,
    pub is_private: bool,
    pub chunk_size: Option<i64>,
    pub options: serde_json::Value,
    pub dir_name_rule: Option<String>,
    pub file_name_rule: Option<String>,
    pub node_id: Option<Uuid>,
}

pub const DEFAULT_DIR_RULE: &str = "{uid}/{year}/{month}";
pub const DEFAULT_FILE_RULE: &str = "{uuid}_{originname}";

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::POLICY_NOT_FOUND, "no such storage policy")
}

pub fn view(row: &PolicyRow) -> ServiceResult<PolicyView> {
    let mut options = row.options.to_json();
    if let Some(map) = options.as_object_mut()
        && let Some(secret) = map.remove("secret_key")
    {
        map.insert("has_secret_key".into(), serde_json::Value::Bool(secret.as_str().is_some_and(|s| !s.is_empty())));
    }
    Ok(PolicyView {
        id: row.id.into(),
        name: row.name.clone(),
        kind: row.kind,
        max_size: row.max_size,
        is_private: row.is_private,
        chunk_size: row.chunk_size,
        options,
        dir_name_rule: row.dir_name_rule.clone(),
        file_name_rule: row.file_name_rule.clone(),
        node_id: row.node_id.map(Uuid::from),
    })
}

pub fn summary(row: &PolicyRow) -> ServiceResult<PolicySummary> {
    Ok(PolicySummary {
        id: row.id.into(),
        name: row.name.clone(),
        kind: row.kind,
        max_size: row.max_size,
        chunk_size: row.chunk_size,
    })
}

pub async fn find(ctx: &Context, id: PolicyId) -> ServiceResult<PolicyRow> {
    let db = ctx.db();
    db::policies::find(db, id).await?.ok_or_else(not_found)
}

/// A checked policy input in its stored form.
struct Validated {
    name: String,
    chunk_size: i64,
    options: PolicyOptions,
    dir_rule: String,
    file_rule: String,
    node_id: Option<NodeId>,
}

impl Validated {
    fn values<'a>(&'a self, input: &PolicyInput) -> PolicyValues<'a> {
        PolicyValues {
            name: &self.name,
            max_size: input.max_size,
            is_private: input.is_private,
            chunk_size: self.chunk_size,
            options: &self.options,
            dir_name_rule: &self.dir_rule,
            file_name_rule: &self.file_rule,
            node_id: self.node_id,
        }
    }
}

/// Checks the input; answers it as stored (an S3 secret left blank keeps `previous`'s).
fn validate(input: &PolicyInput, previous: Option<&PolicyRow>) -> ServiceResult<Validated> {
    let name = input.name.trim();
    if name.is_empty() || name.chars().count() > 64 {
        return Err(ServiceError::validation("name", "name must be 1 to 64 characters"));
    }
    if input.max_size < 0 {
        return Err(ServiceError::validation("max_size", "max_size must be 0 (no limit) or more bytes"));
    }
    let chunk_size = input.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE);
    validate_chunk_size(input.kind, chunk_size).map_err(|e| ServiceError::validation("chunk_size", e))?;
    let dir_rule = input.dir_name_rule.clone().unwrap_or_else(|| DEFAULT_DIR_RULE.to_owned());
    let file_rule = input.file_name_rule.clone().unwrap_or_else(|| DEFAULT_FILE_RULE.to_owned());
    naming::validate_rule(&dir_rule).map_err(|e| ServiceError::validation("dir_name_rule", e))?;
    naming::validate_rule(&file_rule).map_err(|e| ServiceError::validation("file_name_rule", e))?;
    let options = match input.kind {
        PolicyType::Local => {
            let options: LocalOptions = serde_json::from_value(input.options.clone())
                .map_err(|e| ServiceError::validation("options", format!("local options: {e}")))?;
            PolicyOptions::Local(options)
        }
        PolicyType::S3 => {
            let mut options: S3Options = serde_json::from_value(input.options.clone())
                .map_err(|e| ServiceError::validation("options", format!("s3 options: {e}")))?;
            if options.bucket.is_empty() || options.region.is_empty() || options.access_key.is_empty() {
                return Err(ServiceError::validation("options", "s3 options need bucket, region and access_key"));
            }
            if options.secret_key.is_empty()
                && let Some(previous) = previous
                && let PolicyOptions::S3(old) = &previous.options
            {
                options.secret_key = old.secret_key.clone();
            }
            if options.secret_key.is_empty() {
                return Err(ServiceError::validation("options", "s3 options need secret_key"));
            }
            PolicyOptions::S3(options)
        }
    };
    if input.node_id.is_some() && input.kind != PolicyType::Local {
        return Err(ServiceError::validation("node_id", "only a local policy can be bound to a storage node"));
    }
    let node_id = input.node_id.map(NodeId::from);
    Ok(Validated { name: name.to_owned(), chunk_size, options, dir_rule, file_rule, node_id })
}

/// Refuses a node that does not exist.
async fn check_node(db: &Db, checked: &Validated) -> ServiceResult<()> {
    if let Some(node_id) = checked.node_id
        && db::nodes::find(db, node_id).await?.is_none()
    {
        return Err(ServiceError::validation("node_id", "no such storage node"));
    }
    Ok(())
}

fn name_taken(e: DbError, name: &str) -> ServiceError {
    match e {
        ref err if err.is_unique_violation() => {
            ServiceError::conflict(codes::POLICY_NAME_TAKEN, format!("a policy named {name:?} exists"))
                .with_field("name")
        }
        other => other.into(),
    }
}

pub async fn list(ctx: &Context) -> ServiceResult<Vec<PolicyView>> {
    let db = ctx.db();
    db::policies::list(db).await?.iter().map(view).collect()
}

pub async fn create(ctx: &Context, actor: UserId, input: PolicyInput) -> ServiceResult<PolicyView> {
    let db = ctx.db();
    let checked = validate(&input, None)?;
    check_node(db, &checked).await?;
    let id = PolicyId::random();
    db::policies::insert(db, id, &checked.values(&input), now_ms()).await.map_err(|e| name_taken(e, &checked.name))?;
    let created = Activity::by(actor, Action::AdminPolicyCreate).on(TargetKind::Policy, id, Some(&checked.name));
    activity::record(db, created).await;
    view(&find(ctx, id).await?)
}

pub async fn update(ctx: &Context, actor: UserId, id: PolicyId, input: PolicyInput) -> ServiceResult<PolicyView> {
    let db = ctx.db();
    let previous = find(ctx, id).await?;
    let checked = validate(&input, Some(&previous))?;
    check_node(db, &checked).await?;
    let moved = previous.kind != input.kind || previous.node_id != checked.node_id;
    if moved && db::policies::usage_by_files(db, previous.id).await? > 0 {
        return Err(ServiceError::conflict(
            codes::POLICY_IN_USE,
            "the type or node of a policy that stores files cannot change (migrate the files instead)",
        ));
    }
    // A new version stamp makes the storage registry rebuild the store.
    let stamp = now_ms().max(previous.updated_at + 1);
    db::policies::update(db, previous.id, &checked.values(&input), stamp)
        .await
        .map_err(|e| name_taken(e, &checked.name))?;
    let updated = Activity::by(actor, Action::AdminPolicyUpdate).on(TargetKind::Policy, id, Some(&checked.name));
    activity::record(db, updated).await;
    view(&find(ctx, id).await?)
}

pub async fn delete(ctx: &Context, actor: UserId, id: PolicyId) -> ServiceResult<()> {
    let db = ctx.db();
    let policy = find(ctx, id).await?;
    if db::policies::usage(db, policy.id).await? > 0 {
        return Err(ServiceError::conflict(codes::POLICY_IN_USE, "the policy is linked to groups or stores files"));
    }
    db::policies::delete(db, policy.id).await?;
    let deleted = Activity::by(actor, Action::AdminPolicyDelete).on(TargetKind::Policy, id, Some(&policy.name));
    activity::record(db, deleted).await;
    Ok(())
}

/// Writes, reads back and deletes a probe blob with the policy's store.
pub async fn test(ctx: &Context, id: PolicyId) -> ServiceResult<()> {
    let policy = find(ctx, id).await?;
    let store = match policy.node_id {
        Some(_) => store(ctx, &policy).await?,
        None => ctx.storage().build(&policy).map_err(|e| ServiceError::validation("options", e.to_string()))?,
    };
    store.check().await.map_err(|e| {
        ServiceError::new(ErrorKind::BadGateway, codes::POLICY_UNREACHABLE, format!("the storage does not work: {e}"))
    })
}

/// The blob store of `policy`: the policy's own, or the store of the node it is bound to. A
/// disabled node answers 503 `node.unavailable` here, before any call is tried.
pub async fn store(ctx: &Context, policy: &PolicyRow) -> ServiceResult<Arc<dyn BlobStore>> {
    let Some(node_id) = policy.node_id else {
        return ctx.storage().store(policy).map_err(ServiceError::internal);
    };
    let node = db::nodes::find(ctx.db(), node_id)
        .await?
        .ok_or_else(|| ServiceError::internal(anyhow::anyhow!("policy {} names a missing node", policy.id)))?;
    if !node.enabled {
        return Err(node_unavailable(&node.name, "is disabled"));
    }
    ctx.storage().node_store(&node).map_err(ServiceError::internal)
}

/// 503 for a storage node that cannot take part now.
pub fn node_unavailable(name: &str, why: impl std::fmt::Display) -> ServiceError {
    ServiceError::new(
        ErrorKind::Unavailable,
        codes::NODE_UNAVAILABLE,
        format!("storage node {name} {why}; try again later"),
    )
}

/// The policies of a group, in order.
pub async fn of_group(ctx: &Context, group_id: GroupId) -> ServiceResult<Vec<PolicySummary>> {
    let db = ctx.db();
    db::policies::of_group(db, group_id).await?.iter().map(summary).collect()
}

/// The policy an upload by a member of `group_id` goes to: the requested one if the group may
/// use it (403 otherwise), else the group's first policy.
pub async fn policy_for(db: &Db, group_id: GroupId, requested: Option<Uuid>) -> ServiceResult<PolicyRow> {
    let policies = db::policies::of_group(db, group_id).await?;
    let chosen = match requested {
        Some(id) => policies.into_iter().find(|p| p.id == PolicyId::from(id)),
        None => policies.into_iter().next(),
    };
    chosen.ok_or_else(not_allowed)
}

/// The refusal of a policy the caller's group may not use (or of any write when it has none).
pub fn not_allowed() -> ServiceError {
    ServiceError::new(ErrorKind::Forbidden, codes::POLICY_NOT_ALLOWED, "your group may not use this storage policy")
        .with_field("policy_id")
}
