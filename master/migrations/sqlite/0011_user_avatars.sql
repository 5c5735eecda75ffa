-- Uploaded avatars: the re-encoded square PNG (at most 256 px, a few tens of KiB), one row per
-- user, kept in the database so it survives restarts and every master serves it without a
-- shared disk. `users.avatar` says which source is in force (`file`, `gravatar` or NULL).
CREATE TABLE user_avatars (
    user_id     TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    image       BLOB NOT NULL,
    etag        TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);
