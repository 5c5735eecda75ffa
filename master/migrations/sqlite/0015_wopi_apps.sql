-- WOPI applications (Collabora Online, OnlyOffice, Microsoft 365 for the web) an administrator
-- added by their discovery URL. `discovery` holds the parsed discovery (actions per extension
-- and proof keys) as JSON, refreshed periodically; `error` says why the last fetch failed (the
-- previous discovery stays in use). `internal` lets the fetch reach private addresses;
-- `allow_unsigned` accepts requests of an application that publishes no proof key.
CREATE TABLE wopi_apps (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    discovery_url   TEXT NOT NULL,
    internal        INTEGER NOT NULL DEFAULT 0 CHECK (internal IN (0, 1)),
    allow_unsigned  INTEGER NOT NULL DEFAULT 0 CHECK (allow_unsigned IN (0, 1)),
    discovery       TEXT,
    error           TEXT,
    refreshed_at    BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
