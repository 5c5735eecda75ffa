-- Nubo initial schema (SQLite). Mirrors postgres/0001_initial.sql column for column.
-- Conventions (the sqlx Any driver reads only these types on both backends): ids are UUID strings (TEXT); times are BIGINT milliseconds since the Unix epoch;
-- sizes are BIGINT bytes; JSON documents are TEXT; booleans are INTEGER 0/1.

CREATE TABLE settings (
    name        TEXT PRIMARY KEY NOT NULL,
    type        TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);

CREATE TABLE nodes (
    id              TEXT PRIMARY KEY NOT NULL,
    name            TEXT NOT NULL UNIQUE,
    base_url        TEXT NOT NULL,
    secret_key      TEXT NOT NULL,
    enabled         INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    status          TEXT NOT NULL DEFAULT 'unknown',
    last_heartbeat  BIGINT,
    free_space      BIGINT,
    capabilities    TEXT NOT NULL DEFAULT '{}',
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE TABLE policies (
    id              TEXT PRIMARY KEY NOT NULL,
    name            TEXT NOT NULL UNIQUE,
    type            TEXT NOT NULL CHECK (type IN ('local', 's3')),
    node_id         TEXT REFERENCES nodes(id) ON DELETE RESTRICT,
    max_size        BIGINT NOT NULL DEFAULT 0 CHECK (max_size >= 0),
    is_private      INTEGER NOT NULL DEFAULT 1 CHECK (is_private IN (0, 1)),
    chunk_size      BIGINT NOT NULL CHECK (chunk_size > 0),
    options         TEXT NOT NULL DEFAULT '{}',
    dir_name_rule   TEXT NOT NULL,
    file_name_rule  TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE TABLE groups (
    id           TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    is_admin     INTEGER NOT NULL DEFAULT 0 CHECK (is_admin IN (0, 1)),
    max_storage  BIGINT NOT NULL CHECK (max_storage >= 0),
    permissions  TEXT NOT NULL DEFAULT '{}',
    -- Days trashed objects are kept before they are deleted for good.
    trash_retention_days INTEGER NOT NULL DEFAULT 30 CHECK (trash_retention_days > 0),
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

-- Ordered policy list of a group; position 0 is the default policy of newly registered users.
CREATE TABLE group_policies (
    group_id   TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    policy_id  TEXT NOT NULL REFERENCES policies(id) ON DELETE RESTRICT,
    position   INTEGER NOT NULL CHECK (position >= 0),
    PRIMARY KEY (group_id, policy_id),
    UNIQUE (group_id, position)
);

CREATE TABLE theme_presets (
    id               TEXT PRIMARY KEY NOT NULL,
    name             TEXT NOT NULL UNIQUE,
    primary_color    TEXT NOT NULL,
    secondary_color  TEXT NOT NULL,
    success_color    TEXT NOT NULL,
    info_color       TEXT NOT NULL,
    warning_color    TEXT NOT NULL,
    error_color      TEXT NOT NULL,
    neutral_color    TEXT NOT NULL,
    is_default       INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
-- At most one default preset.
CREATE UNIQUE INDEX theme_presets_one_default ON theme_presets (is_default) WHERE is_default = 1;

-- A user has no password: credentials live in auth_identities.
CREATE TABLE users (
    id               TEXT PRIMARY KEY NOT NULL,
    email            TEXT NOT NULL UNIQUE,
    nickname         TEXT NOT NULL,
    status           TEXT NOT NULL,
    group_id         TEXT NOT NULL REFERENCES groups(id) ON DELETE RESTRICT,
    storage          BIGINT NOT NULL DEFAULT 0 CHECK (storage >= 0),
    language         TEXT NOT NULL DEFAULT 'en-US',
    timezone         INTEGER NOT NULL DEFAULT 0 CHECK (timezone BETWEEN -12 AND 14),
    two_factor_key   TEXT,
    avatar           TEXT,
    color_primary    TEXT,
    color_secondary  TEXT,
    color_success    TEXT,
    color_info       TEXT,
    color_warning    TEXT,
    color_error      TEXT,
    color_neutral    TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX users_group ON users (group_id);

CREATE TABLE auth_identities (
    id            TEXT PRIMARY KEY NOT NULL,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    provider      TEXT NOT NULL,
    identifier    TEXT NOT NULL,
    credential    TEXT,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    UNIQUE (provider, identifier)
);
CREATE INDEX auth_identities_user ON auth_identities (user_id);

CREATE TABLE user_authns (
    id             TEXT PRIMARY KEY NOT NULL,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    credential_id  TEXT NOT NULL UNIQUE,
    name           TEXT NOT NULL,
    passkey        TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    last_used_at   BIGINT
);
CREATE INDEX user_authns_user ON user_authns (user_id);

-- Refresh tokens rotate: each use retires the row and issues a successor in the same family.
CREATE TABLE refresh_tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    family_id   TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    retired_at  BIGINT,
    revoked_at  BIGINT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE storage_packs (
    id          TEXT PRIMARY KEY NOT NULL,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    size        BIGINT NOT NULL CHECK (size >= 0),
    active_from BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX storage_packs_user ON storage_packs (user_id, expires_at);

CREATE TABLE redeems (
    id          TEXT PRIMARY KEY NOT NULL,
    code        TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL DEFAULT '{}',
    used_by     TEXT REFERENCES users(id) ON DELETE SET NULL,
    used_at     BIGINT,
    created_at  BIGINT NOT NULL
);

CREATE TABLE physical_files (
    id           TEXT PRIMARY KEY NOT NULL,
    policy_id    TEXT NOT NULL REFERENCES policies(id) ON DELETE RESTRICT,
    storage_key  TEXT NOT NULL,
    size         BIGINT NOT NULL CHECK (size >= 0),
    blake3       TEXT,
    ref_count    BIGINT NOT NULL CHECK (ref_count >= 0),
    created_at   BIGINT NOT NULL,
    UNIQUE (policy_id, storage_key)
);
CREATE INDEX physical_files_dedup ON physical_files (policy_id, blake3, size);

-- Files and folders. The path is derived from the parent chain, so a move touches one row.
CREATE TABLE objects (
    id                TEXT PRIMARY KEY NOT NULL,
    owner_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    parent_id         TEXT REFERENCES objects(id) ON DELETE CASCADE,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('file', 'folder')),
    policy_id         TEXT REFERENCES policies(id) ON DELETE RESTRICT,
    physical_file_id  TEXT REFERENCES physical_files(id) ON DELETE RESTRICT,
    size              BIGINT NOT NULL DEFAULT 0 CHECK (size >= 0),
    trashed_at        BIGINT,
    -- The object whose deletion put this one in the trash (itself, or a trashed ancestor).
    trash_root_id     TEXT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
-- Names are unique among the live children of a folder; one root (no parent) per user.
CREATE UNIQUE INDEX objects_live_name ON objects (owner_id, parent_id, name) WHERE trashed_at IS NULL;
CREATE UNIQUE INDEX objects_one_root ON objects (owner_id) WHERE parent_id IS NULL;
-- Folder listings (folders first: 'folder' sorts after 'file', hence kind DESC) walk this
-- index in order instead of sorting.
CREATE INDEX objects_listing ON objects (parent_id, kind DESC, name, id) WHERE trashed_at IS NULL;
CREATE INDEX objects_physical_file ON objects (physical_file_id);
CREATE INDEX objects_trash ON objects (owner_id, trash_root_id);

CREATE TABLE object_metadata (
    object_id  TEXT NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (object_id, namespace, name)
);

CREATE TABLE custom_property_definitions (
    id             TEXT PRIMARY KEY NOT NULL,
    owner_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    type           TEXT NOT NULL,
    options        TEXT NOT NULL DEFAULT '{}',
    default_value  TEXT,
    created_at     BIGINT NOT NULL,
    UNIQUE (owner_id, name)
);

CREATE TABLE upload_sessions (
    id                 TEXT PRIMARY KEY NOT NULL,
    owner_id           TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- NO ACTION: a folder with an upload in progress cannot be purged on its own (the
    -- session's quota reservation and staged bytes must be released first).
    parent_id          TEXT NOT NULL REFERENCES objects(id),
    file_name          TEXT NOT NULL,
    policy_id          TEXT NOT NULL REFERENCES policies(id) ON DELETE RESTRICT,
    node_id            TEXT REFERENCES nodes(id) ON DELETE RESTRICT,
    declared_size      BIGINT NOT NULL CHECK (declared_size >= 0),
    chunk_size         BIGINT NOT NULL CHECK (chunk_size > 0),
    total_chunks       INTEGER NOT NULL CHECK (total_chunks >= 0),
    storage_key        TEXT NOT NULL,
    driver_state       TEXT NOT NULL DEFAULT '{}',
    replace_object_id  TEXT REFERENCES objects(id),
    status             TEXT NOT NULL,
    expires_at         BIGINT NOT NULL,
    created_at         BIGINT NOT NULL
);
CREATE INDEX upload_sessions_expiry ON upload_sessions (status, expires_at);

CREATE TABLE upload_chunks (
    session_id   TEXT NOT NULL REFERENCES upload_sessions(id) ON DELETE CASCADE,
    chunk_index  INTEGER NOT NULL CHECK (chunk_index >= 0),
    size         BIGINT NOT NULL CHECK (size >= 0),
    etag         TEXT,
    -- blake3 chaining value of the chunk as a subtree at its offset (hex).
    chaining_value TEXT NOT NULL,
    received_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, chunk_index)
);

CREATE TABLE source_links (
    id          TEXT PRIMARY KEY NOT NULL,
    object_id   TEXT NOT NULL UNIQUE REFERENCES objects(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    downloads   BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL
);

CREATE TABLE shares (
    id                   TEXT PRIMARY KEY NOT NULL,
    code                 TEXT NOT NULL UNIQUE,
    owner_id             TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    object_id            TEXT NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    password_hash        TEXT,
    expires_at           BIGINT,
    remaining_downloads  BIGINT,
    views                BIGINT NOT NULL DEFAULT 0,
    downloads            BIGINT NOT NULL DEFAULT 0,
    created_at           BIGINT NOT NULL
);
CREATE INDEX shares_owner ON shares (owner_id);

CREATE TABLE reports (
    id           TEXT PRIMARY KEY NOT NULL,
    share_id     TEXT NOT NULL REFERENCES shares(id) ON DELETE CASCADE,
    reporter_id  TEXT REFERENCES users(id) ON DELETE SET NULL,
    reason       TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);

CREATE TABLE tags (
    id          TEXT PRIMARY KEY NOT NULL,
    owner_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('manual', 'automatic')),
    expression  TEXT,
    color       TEXT,
    created_at  BIGINT NOT NULL,
    UNIQUE (owner_id, name)
);

CREATE TABLE object_tags (
    tag_id     TEXT NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    object_id  TEXT NOT NULL REFERENCES objects(id) ON DELETE CASCADE,
    PRIMARY KEY (tag_id, object_id)
);

CREATE TABLE tasks (
    id            TEXT PRIMARY KEY NOT NULL,
    type          TEXT NOT NULL,
    status        TEXT NOT NULL,
    owner_id      TEXT REFERENCES users(id) ON DELETE CASCADE,
    props         TEXT NOT NULL DEFAULT '{}',
    progress      TEXT NOT NULL DEFAULT '{}',
    error         TEXT,
    attempts      INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL DEFAULT 5,
    run_after     BIGINT NOT NULL,
    lease_owner   TEXT,
    lease_until   BIGINT,
    -- Set by a cancel request; the worker stops at its next safe point.
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    finished_at   BIGINT
);
CREATE INDEX tasks_claim ON tasks (status, run_after);
CREATE INDEX tasks_owner ON tasks (owner_id, created_at);

CREATE TABLE webdav_accounts (
    id             TEXT PRIMARY KEY NOT NULL,
    owner_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    password_hash  TEXT NOT NULL,
    root_path      TEXT NOT NULL DEFAULT '/',
    read_only      INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    UNIQUE (owner_id, name)
);
