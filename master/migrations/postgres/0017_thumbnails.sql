-- Image thumbnails (issue 38), keyed by the content's blake3 and the longest side, so identical
-- files share one whatever their owner, name or policy. A few tens of KiB each, kept in the
-- database like avatars: every master serves them without a shared disk, and no storage policy
-- holds bytes that are not files. `state` is `pending` (a THUMBNAIL task is making it),
-- `ready` (`image` holds the JPEG) or `failed` (`error_code` says why; never retried).
CREATE TABLE thumbnails (
    blake3      TEXT NOT NULL,
    side        BIGINT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'ready', 'failed')),
    image       BYTEA,
    error_code  TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (blake3, side)
);
-- The thumbnail sweep asks whether any live blob still has a content hash.
CREATE INDEX physical_files_blake3 ON physical_files (blake3);
