-- Storage packs that may last forever, be revoked, and be marked expired by a periodic job;
-- redeem codes (hashed, several uses each) with one use per user; temporary groups that a
-- group code gives and a periodic job ends. The unused single-use `redeems` table goes.
DROP TABLE redeems;

CREATE TABLE redeem_codes (
    id            TEXT PRIMARY KEY NOT NULL,
    -- SHA-256 (hex) of the normalised code; the code itself is never stored.
    code_hash     TEXT NOT NULL UNIQUE,
    -- The code's first four characters, so an administrator can tell codes apart.
    hint          TEXT NOT NULL,
    -- The codes generated together share a batch id.
    batch_id      TEXT NOT NULL,
    name          TEXT NOT NULL DEFAULT '',
    kind          TEXT NOT NULL CHECK (kind IN ('storage_pack', 'group')),
    pack_size     BIGINT CHECK (pack_size IS NULL OR pack_size > 0),
    group_id      TEXT REFERENCES groups(id) ON DELETE CASCADE,
    -- How long what the code gives lasts, in seconds.
    duration      BIGINT NOT NULL CHECK (duration > 0),
    uses_per_code BIGINT NOT NULL CHECK (uses_per_code > 0),
    used          BIGINT NOT NULL DEFAULT 0 CHECK (used >= 0 AND used <= uses_per_code),
    expires_at    BIGINT,
    disabled_at   BIGINT,
    created_by    TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX redeem_codes_batch ON redeem_codes (batch_id);
CREATE INDEX redeem_codes_created ON redeem_codes (created_at);

CREATE TABLE redeem_uses (
    code_id  TEXT NOT NULL REFERENCES redeem_codes(id) ON DELETE CASCADE,
    user_id  TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    used_at  BIGINT NOT NULL,
    PRIMARY KEY (code_id, user_id)
);

-- SQLite cannot drop NOT NULL: the table is rebuilt (nothing refers to it).
CREATE TABLE storage_packs_rebuilt (
    id          TEXT PRIMARY KEY NOT NULL,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    size        BIGINT NOT NULL CHECK (size >= 0),
    starts_at   BIGINT NOT NULL,
    -- NULL: the pack lasts forever.
    expires_at  BIGINT,
    created_at  BIGINT NOT NULL,
    -- `admin` (granted) or `redeem` (from a code).
    source      TEXT NOT NULL DEFAULT 'admin' CHECK (source IN ('admin', 'redeem')),
    granted_by  TEXT REFERENCES users(id) ON DELETE SET NULL,
    redeem_code_id TEXT REFERENCES redeem_codes(id) ON DELETE SET NULL,
    revoked_at  BIGINT,
    revoked_by  TEXT REFERENCES users(id) ON DELETE SET NULL,
    -- Set once by the expiry job (capacity never reads it: it compares times).
    expired_at  BIGINT
);
INSERT INTO storage_packs_rebuilt (id, user_id, name, size, starts_at, expires_at, created_at)
    SELECT id, user_id, name, size, active_from, expires_at, created_at FROM storage_packs;
DROP TABLE storage_packs;
ALTER TABLE storage_packs_rebuilt RENAME TO storage_packs;
CREATE INDEX storage_packs_user ON storage_packs (user_id, starts_at);
CREATE INDEX storage_packs_unmarked ON storage_packs (expires_at) WHERE expired_at IS NULL;

-- A user in a group for a time (from a group code): where they return when it ends.
CREATE TABLE temporary_groups (
    user_id           TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    group_id          TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
    -- NULL when that group was deleted meanwhile: the user then goes to the registration group.
    previous_group_id TEXT REFERENCES groups(id) ON DELETE SET NULL,
    starts_at         BIGINT NOT NULL,
    ends_at           BIGINT NOT NULL,
    redeem_code_id    TEXT REFERENCES redeem_codes(id) ON DELETE SET NULL
);
CREATE INDEX temporary_groups_ends ON temporary_groups (ends_at);
