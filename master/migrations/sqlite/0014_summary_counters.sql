-- The administration summary (`GET /admin/summary`) reads these instead of aggregating the
-- objects and blobs tables: counting a million objects takes SQLite a full index scan (about
-- 0.7 s on this machine), reading this row takes microseconds. Triggers keep them true on every
-- write path (uploads, WebDAV, copies, purges, cascades from deleted users), so no service code
-- has to remember them. SQLite has one writer at a time and updates a row in place, so these
-- triggers update the counters directly (PostgreSQL's append deltas and fold them, see its
-- migration; `summary_deltas` exists here too, always empty, so one query reads both).
-- Root folders (no parent: one per user) are not counted; `shard` is always 0.
CREATE TABLE summary_counters (
    shard       INTEGER PRIMARY KEY NOT NULL,
    files       BIGINT NOT NULL DEFAULT 0,
    folders     BIGINT NOT NULL DEFAULT 0,
    -- Objects in a trash (files and folders), counted in `files`/`folders` too.
    trashed     BIGINT NOT NULL DEFAULT 0,
    -- Sum of file sizes (logical bytes), the trash included.
    file_bytes  BIGINT NOT NULL DEFAULT 0,
    -- Stored blobs (`physical_files`) and their sizes (physical bytes).
    blobs       BIGINT NOT NULL DEFAULT 0,
    blob_bytes  BIGINT NOT NULL DEFAULT 0
);
INSERT INTO summary_counters (shard, files, folders, trashed, file_bytes, blobs, blob_bytes) SELECT 0,
    (SELECT COUNT(*) FROM objects WHERE kind = 'file' AND parent_id IS NOT NULL),
    (SELECT COUNT(*) FROM objects WHERE kind = 'folder' AND parent_id IS NOT NULL),
    (SELECT COUNT(*) FROM objects WHERE trashed_at IS NOT NULL AND parent_id IS NOT NULL),
    (SELECT COALESCE(SUM(size), 0) FROM objects WHERE kind = 'file' AND parent_id IS NOT NULL),
    (SELECT COUNT(*) FROM physical_files),
    (SELECT COALESCE(SUM(size), 0) FROM physical_files);

-- Files added per UTC day (`created_at / 86400000`): uploads, copies and saves from shares,
-- with their sizes when added. A history: deleting a file later does not take it back.
CREATE TABLE summary_daily (
    day           BIGINT NOT NULL,
    shard         INTEGER NOT NULL,
    uploads       BIGINT NOT NULL DEFAULT 0,
    upload_bytes  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, shard)
);
INSERT INTO summary_daily (day, shard, uploads, upload_bytes)
    SELECT created_at / 86400000, 0, COUNT(*), SUM(size) FROM objects
    WHERE kind = 'file' AND parent_id IS NOT NULL GROUP BY created_at / 86400000;

-- PostgreSQL's unfolded changes; never written on SQLite.
CREATE TABLE summary_deltas (
    files         BIGINT NOT NULL DEFAULT 0,
    folders       BIGINT NOT NULL DEFAULT 0,
    trashed       BIGINT NOT NULL DEFAULT 0,
    file_bytes    BIGINT NOT NULL DEFAULT 0,
    blobs         BIGINT NOT NULL DEFAULT 0,
    blob_bytes    BIGINT NOT NULL DEFAULT 0,
    day           BIGINT,
    uploads       BIGINT NOT NULL DEFAULT 0,
    upload_bytes  BIGINT NOT NULL DEFAULT 0
);

CREATE TRIGGER summary_object_insert AFTER INSERT ON objects WHEN NEW.parent_id IS NOT NULL
BEGIN
    UPDATE summary_counters SET
        files = files + (NEW.kind = 'file'),
        folders = folders + (NEW.kind = 'folder'),
        trashed = trashed + (NEW.trashed_at IS NOT NULL),
        file_bytes = file_bytes + CASE WHEN NEW.kind = 'file' THEN NEW.size ELSE 0 END
    WHERE shard = 0;
    INSERT INTO summary_daily (day, shard, uploads, upload_bytes)
        SELECT NEW.created_at / 86400000, 0, 1, NEW.size WHERE NEW.kind = 'file'
        ON CONFLICT (day, shard) DO UPDATE SET uploads = uploads + 1, upload_bytes = upload_bytes + excluded.upload_bytes;
END;

CREATE TRIGGER summary_object_delete AFTER DELETE ON objects WHEN OLD.parent_id IS NOT NULL
BEGIN
    UPDATE summary_counters SET
        files = files - (OLD.kind = 'file'),
        folders = folders - (OLD.kind = 'folder'),
        trashed = trashed - (OLD.trashed_at IS NOT NULL),
        file_bytes = file_bytes - CASE WHEN OLD.kind = 'file' THEN OLD.size ELSE 0 END
    WHERE shard = 0;
END;

CREATE TRIGGER summary_object_update AFTER UPDATE OF size, trashed_at ON objects WHEN NEW.parent_id IS NOT NULL
BEGIN
    UPDATE summary_counters SET
        trashed = trashed + (NEW.trashed_at IS NOT NULL) - (OLD.trashed_at IS NOT NULL),
        file_bytes = file_bytes + CASE WHEN NEW.kind = 'file' THEN NEW.size - OLD.size ELSE 0 END
    WHERE shard = 0;
END;

CREATE TRIGGER summary_blob_insert AFTER INSERT ON physical_files
BEGIN
    UPDATE summary_counters SET blobs = blobs + 1, blob_bytes = blob_bytes + NEW.size WHERE shard = 0;
END;

CREATE TRIGGER summary_blob_delete AFTER DELETE ON physical_files
BEGIN
    UPDATE summary_counters SET blobs = blobs - 1, blob_bytes = blob_bytes - OLD.size WHERE shard = 0;
END;

CREATE TRIGGER summary_blob_update AFTER UPDATE OF size ON physical_files
BEGIN
    UPDATE summary_counters SET blob_bytes = blob_bytes + NEW.size - OLD.size WHERE shard = 0;
END;

-- New accounts in the last day/week and registrations per day read a range of this index.
CREATE INDEX users_created ON users (created_at);
