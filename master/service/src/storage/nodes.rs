//! Storage nodes as administrators manage them: the registry (name, base URL, shared key,
//! enabled flag) and a signed `ping` that checks a node and records its health. The node key is
//! write-only: no answer carries it.

use crate::context::Context;
use std::time::Duration;

use nubo_common::secret::Secret;
use nubo_model::db::nodes::NodeRow;
use nubo_model::db::{self, DbError};
use nubo_model::domain::ids::NodeId;
use nubo_model::domain::node::NodeStatus;
use nubo_model::domain::time::{now_ms, to_rfc3339};
use nubo_protocol::client::{CallError, NODE_RPC_PATH, RpcClient};
use nubo_protocol::key::NodeKey;
use nubo_protocol::methods::{PingParams, PingResult};
use nubo_protocol::{PROTOCOL_VERSION, Role};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{ErrorKind, ServiceError, ServiceResult};
use crate::error_codes as codes;

/// Longest a health check waits for the node.
const PING_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NodeView {
    pub id: Uuid,
    pub name: String,
    pub base_url: String,
    pub enabled: bool,
    /// `unknown` until checked, then `online` or `offline`.
    pub status: String,
    pub last_heartbeat: Option<String>,
    /// Bytes free on the node, when it reports them.
    pub free_space: Option<i64>,
    pub capabilities: serde_json::Value,
}

/// A node as administrators write it; a missing key on update keeps the stored one.
pub struct NodeInput {
    pub name: String,
    pub base_url: String,
    pub key: Option<Secret>,
    pub enabled: bool,
}

/// What a successful check learned.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NodeCheck {
    pub protocol_version: u32,
    pub software: String,
    pub free_space: Option<u64>,
    pub total_space: Option<u64>,
}

fn not_found() -> ServiceError {
    ServiceError::not_found(codes::NODE_NOT_FOUND, "no such storage node")
}

fn view(row: &NodeRow) -> ServiceResult<NodeView> {
    Ok(NodeView {
        id: row.id.into(),
        name: row.name.clone(),
        base_url: row.base_url.clone(),
        enabled: row.enabled,
        status: row.status.as_str().to_owned(),
        last_heartbeat: row.last_heartbeat.map(to_rfc3339),
        free_space: row.free_space,
        capabilities: row.capabilities.clone(),
    })
}

fn validate(input: &NodeInput) -> ServiceResult<(String, String)> {
    let name = input.name.trim();
    if name.is_empty() || name.chars().count() > 64 {
        return Err(ServiceError::validation("name", "name must be 1 to 64 characters"));
    }
    let url = reqwest::Url::parse(input.base_url.trim())
        .map_err(|_| ServiceError::validation("base_url", "base_url must be an absolute URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ServiceError::validation("base_url", "base_url must be an http or https URL"));
    }
    if let Some(key) = &input.key {
        NodeKey::new(key).map_err(|e| ServiceError::validation("key", e.to_string()))?;
    }
    Ok((name.to_owned(), url.as_str().trim_end_matches('/').to_owned()))
}

fn name_taken(err: DbError) -> ServiceError {
    match err {
        ref e if e.is_unique_violation() => {
            ServiceError::conflict(codes::NODE_NAME_TAKEN, "a node with that name exists").with_field("name")
        }
        other => other.into(),
    }
}

pub async fn list(ctx: &Context) -> ServiceResult<Vec<NodeView>> {
    let db = ctx.db();
    db::nodes::list(db).await?.iter().map(view).collect()
}

pub async fn get(ctx: &Context, id: NodeId) -> ServiceResult<NodeView> {
    let db = ctx.db();
    view(&db::nodes::find(db, id).await?.ok_or_else(not_found)?)
}

pub async fn create(ctx: &Context, input: NodeInput) -> ServiceResult<NodeView> {
    let db = ctx.db();
    let (name, base_url) = validate(&input)?;
    let key = input.key.as_ref().ok_or_else(|| ServiceError::validation("key", "a node needs its shared key"))?;
    let now = now_ms();
    let row = NodeRow {
        id: NodeId::random(),
        name,
        base_url,
        secret_key: key.expose().to_owned(),
        enabled: input.enabled,
        status: NodeStatus::Unknown,
        last_heartbeat: None,
        free_space: None,
        capabilities: serde_json::json!([]),
        created_at: now,
        updated_at: now,
    };
    db::nodes::insert(db, &row).await.map_err(name_taken)?;
    view(&row)
}

pub async fn update(ctx: &Context, id: NodeId, input: NodeInput) -> ServiceResult<NodeView> {
    let db = ctx.db();
    let (name, base_url) = validate(&input)?;
    let current = db::nodes::find(db, id).await?.ok_or_else(not_found)?;
    let row = NodeRow {
        name,
        base_url,
        secret_key: input.key.map_or(current.secret_key.clone(), |k| k.expose().to_owned()),
        enabled: input.enabled,
        updated_at: now_ms(),
        ..current
    };
    db::nodes::update(db, &row).await.map_err(name_taken)?;
    get(ctx, id).await
}

/// Deletes a node no policy uses.
pub async fn delete(ctx: &Context, id: NodeId) -> ServiceResult<()> {
    let db = ctx.db();
    db::nodes::find(db, id).await?.ok_or_else(not_found)?;
    if db::nodes::policies_using(db, id).await? > 0 {
        return Err(ServiceError::conflict(codes::NODE_IN_USE, "storage policies keep their files on this node"));
    }
    db::nodes::delete(db, id).await?;
    Ok(())
}

/// Sends the node a signed `ping` and records the outcome (online with its free space, or
/// offline). A node that cannot be reached answers 503; one that refuses or answers nonsense 502.
pub async fn check(ctx: &Context, id: NodeId) -> ServiceResult<NodeCheck> {
    let db = ctx.db();
    let node = db::nodes::find(db, id).await?.ok_or_else(not_found)?;
    match ping(&node).await {
        Ok(result) => {
            let capabilities = serde_json::to_value(&result.capabilities).unwrap_or_else(|_| serde_json::json!([]));
            let free = result.free_space.and_then(|f| i64::try_from(f).ok());
            db::nodes::set_health(db, node.id, NodeStatus::Online, Some(now_ms()), free, &capabilities).await?;
            Ok(NodeCheck {
                protocol_version: result.protocol_version,
                software: result.software,
                free_space: result.free_space,
                total_space: result.total_space,
            })
        }
        Err(err) => {
            db::nodes::set_health(db, node.id, NodeStatus::Offline, None, node.free_space, &node.capabilities).await?;
            tracing::warn!(node = %node.name, error = %err.message, "storage node check failed");
            Err(err)
        }
    }
}

async fn ping(node: &NodeRow) -> ServiceResult<PingResult> {
    let key = NodeKey::new(&Secret::new(node.secret_key.clone())).map_err(ServiceError::internal)?;
    let client = RpcClient::new(&node.base_url, NODE_RPC_PATH, key, &node.id.to_string(), Role::Master, PING_TIMEOUT)
        .map_err(ServiceError::internal)?;
    client.call(PingParams { protocol_version: PROTOCOL_VERSION }).await.map_err(|error| match error {
        CallError::Unreachable(why) => ServiceError::new(
            ErrorKind::Unavailable,
            codes::NODE_UNREACHABLE,
            format!("the node does not answer: {why}"),
        ),
        CallError::Refused(e) => ServiceError::new(
            ErrorKind::BadGateway,
            codes::NODE_REFUSED,
            format!("the node refused: {} ({})", e.message, e.code.as_str()),
        ),
    })
}

/// Checks every enabled node (the periodic health check); answers how many answered.
pub async fn check_all(ctx: &Context) -> ServiceResult<usize> {
    let mut online = 0;
    for node in db::nodes::list(ctx.db()).await?.into_iter().filter(|n| n.enabled) {
        if check(ctx, node.id).await.is_ok() {
            online += 1;
        }
    }
    Ok(online)
}

/// The origins (`scheme://host[:port]`) of the enabled nodes: the app's pages may send upload
/// chunks straight to them (`connect-src` of their Content-Security-Policy).
pub async fn upload_origins(ctx: &Context) -> ServiceResult<Vec<String>> {
    let db = ctx.db();
    let mut origins: Vec<String> = db::nodes::list(db)
        .await?
        .into_iter()
        .filter(|node| node.enabled)
        .filter_map(|node| reqwest::Url::parse(&node.base_url).ok())
        .map(|url| url.origin().ascii_serialization())
        .filter(|origin| origin != "null")
        .collect();
    origins.sort();
    origins.dedup();
    Ok(origins)
}
