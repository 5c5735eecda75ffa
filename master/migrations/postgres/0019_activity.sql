-- The activity log: one row per state-changing action (sign-ins and failed sign-ins, uploads,
-- deletions, shares, settings, administrators' changes). Rows copy what they name (the target's
-- name at the time) and refer to nothing: no foreign key, no unique or check constraint beyond
-- the fresh id, so the insert made inside an action's transaction cannot be what refuses it,
-- and deleting a user or a file leaves its history readable. `detail` is JSON text; times are
-- milliseconds. Old rows are pruned by the `activity-prune` job (`activity_retention_days`).
CREATE TABLE activity (
    id           TEXT PRIMARY KEY NOT NULL,
    at           BIGINT NOT NULL,
    actor_id     TEXT,
    action       TEXT NOT NULL,
    target_kind  TEXT,
    target_id    TEXT,
    target_name  TEXT,
    address      TEXT,
    detail       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX activity_by_actor ON activity (actor_id, at);
CREATE INDEX activity_by_time ON activity (at);
CREATE INDEX activity_by_action ON activity (action, at);
