-- The ledger of admin imports (`POST /admin/import`): one row per object of a policy's storage
-- that an import recorded as a file, with what the listing said of it then (size, modification
-- time in milliseconds, S3 entity tag) and its content hash. A later run skips an object whose
-- listing still matches without reading it, and re-hashes one that changed. `object_id` is the
-- file it became (the file may since be gone: the row then only keeps the object from being
-- imported twice). Times are milliseconds.
CREATE TABLE imported_files (
    policy_id    TEXT NOT NULL,
    storage_key  TEXT NOT NULL,
    size         BIGINT NOT NULL,
    modified     BIGINT NOT NULL,
    etag         TEXT,
    blake3       TEXT NOT NULL,
    object_id    TEXT NOT NULL,
    imported_at  BIGINT NOT NULL,
    PRIMARY KEY (policy_id, storage_key)
);
