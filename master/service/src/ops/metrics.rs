//! The master's instruments: its Prometheus registry, kept only while a `metrics_token` is
//! configured, and the series read at scrape time (tasks, node health, database pools).

use nubo_common::metrics::Registry;
use nubo_model::db;

use crate::context::Context;
use crate::context::instruments::Instruments;
use crate::error::ServiceResult;

/// Tasks in the queue, by type and status.
pub const TASKS: &str = "nubo_tasks";
/// Storage node health as this master last saw it: 1 online, 0 offline or not checked yet.
pub const NODE_UP: &str = "nubo_node_up";
/// Largest number of connections of a database pool.
pub const DB_POOL_MAX: &str = "nubo_db_pool_max_connections";
/// Open connections of a database pool, by state (`idle`, `in_use`).
pub const DB_POOL_CONNECTIONS: &str = "nubo_db_pool_connections";

/// Every series in the Prometheus text format: what was counted, then what is read now.
pub async fn render(ctx: &Context, instruments: &Instruments) -> ServiceResult<String> {
    let mut text = instruments.registry.render();
    // A registry of this scrape only: a node deleted or a status with no task left drops out
    // of the answer instead of lingering at its last value.
    let now = Registry::new();
    now.describe(TASKS, "Tasks in the queue (database), by type and status.");
    now.describe(NODE_UP, "Storage node health as this master last checked it: 1 online, 0 offline or unchecked.");
    now.describe(DB_POOL_MAX, "Largest number of connections of a database pool.");
    now.describe(DB_POOL_CONNECTIONS, "Open connections of a database pool, by state (idle, in_use).");
    for (kind, status, count) in db::tasks::count_by_type_and_status(ctx.db()).await? {
        now.gauge(TASKS, &[("type", &kind), ("status", &status)]).set(count as f64);
    }
    for node in db::nodes::list(ctx.db()).await? {
        let up = if node.status == nubo_model::domain::node::NodeStatus::Online { 1.0 } else { 0.0 };
        now.gauge(NODE_UP, &[("node", &node.id.to_string()), ("name", &node.name)]).set(up);
    }
    for pool in ctx.db().pool_use() {
        now.gauge(DB_POOL_MAX, &[("pool", pool.name)]).set(pool.max);
        now.gauge(DB_POOL_CONNECTIONS, &[("pool", pool.name), ("state", "idle")]).set(pool.idle);
        now.gauge(DB_POOL_CONNECTIONS, &[("pool", pool.name), ("state", "in_use")])
            .set(pool.open.saturating_sub(pool.idle));
    }
    text.push_str(&now.render());
    Ok(text)
}
