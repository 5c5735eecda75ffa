-- When a change last altered what access tokens snapshot of a user (their group) or of a group
-- (name, admin flag, capacity, permissions), in milliseconds; 0 for never. A master restarted
-- with the in-memory store restores its token revocations from these.
ALTER TABLE users ADD COLUMN claims_changed_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE groups ADD COLUMN claims_changed_at BIGINT NOT NULL DEFAULT 0;
