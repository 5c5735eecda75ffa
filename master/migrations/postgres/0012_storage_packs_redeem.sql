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

ALTER TABLE storage_packs RENAME COLUMN active_from TO starts_at;
-- NULL: the pack lasts forever.
ALTER TABLE storage_packs ALTER COLUMN expires_at DROP NOT NULL;
-- `admin` (granted) or `redeem` (from a code).
ALTER TABLE storage_packs ADD COLUMN source TEXT NOT NULL DEFAULT 'admin' CHECK (source IN ('admin', 'redeem'));
ALTER TABLE storage_packs ADD COLUMN granted_by TEXT REFERENCES users(id) ON DELETE SET NULL;
ALTER TABLE storage_packs ADD COLUMN redeem_code_id TEXT REFERENCES redeem_codes(id) ON DELETE SET NULL;
ALTER TABLE storage_packs ADD COLUMN revoked_at BIGINT;
ALTER TABLE storage_packs ADD COLUMN revoked_by TEXT REFERENCES users(id) ON DELETE SET NULL;
-- Set once by the expiry job (capacity never reads it: it compares times).
ALTER TABLE storage_packs ADD COLUMN expired_at BIGINT;
DROP INDEX storage_packs_user;
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
