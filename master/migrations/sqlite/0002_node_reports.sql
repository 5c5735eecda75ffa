-- Reports from storage nodes, kept so that a report sent again (the node never saw the
-- answer, or the master restarted) gets the same answer and creates nothing twice.

-- `upload_complete` reports already settled, by the node's session handle.
CREATE TABLE node_upload_results (
    node_id         TEXT NOT NULL,
    session_handle  TEXT NOT NULL,
    -- The file the upload created; NULL once that file is gone.
    object_id       TEXT,
    owner_id        TEXT NOT NULL,
    -- 0 when the content was de-duplicated and the node must drop its copy.
    keep_blob       INTEGER NOT NULL CHECK (keep_blob IN (0, 1)),
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (node_id, session_handle)
);
CREATE INDEX node_upload_results_age ON node_upload_results (created_at);

-- One fetch of an EXTERNAL_DOWNLOAD task on a storage node, as far as the node reported it.
CREATE TABLE external_downloads (
    task_id      TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    node_id      TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    policy_id    TEXT NOT NULL REFERENCES policies(id) ON DELETE CASCADE,
    storage_key  TEXT NOT NULL,
    -- running, completed or failed
    state        TEXT NOT NULL,
    downloaded   BIGINT NOT NULL DEFAULT 0,
    total        BIGINT,
    object_id    TEXT,
    keep_blob    INTEGER CHECK (keep_blob IN (0, 1)),
    error        TEXT,
    updated_at   BIGINT NOT NULL
);
