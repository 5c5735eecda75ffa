-- Two-factor recovery codes: ten per user, made when two-factor sign-in is enabled, shown once,
-- kept only as BLAKE3 hashes; a code is deleted when it is used (single use) and all of them
-- when two-factor sign-in is disabled.
CREATE TABLE user_recovery_codes (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash   TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, code_hash)
);
