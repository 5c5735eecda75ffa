-- The administration summary (`GET /admin/summary`) reads these instead of aggregating the
-- objects and blobs tables on each request (a million objects take a scan of the table or an
-- index); triggers keep them true on every write path (uploads, WebDAV, copies, purges,
-- cascades from deleted users), so no service code has to remember them. Each counter is
-- spread over 16 rows (`shard`, picked by the server process: `pg_backend_pid() % 16`) so
-- concurrent writers do not queue on one row; a transaction only ever touches its own
-- process's shard, so two transactions cannot deadlock on them. Readers sum the shards.
-- Root folders (no parent: one per user) are not counted.
CREATE TABLE summary_counters (
    shard       INTEGER PRIMARY KEY,
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
INSERT INTO summary_counters (shard) SELECT generate_series(0, 15);
UPDATE summary_counters SET
    files = (SELECT COUNT(*) FROM objects WHERE kind = 'file' AND parent_id IS NOT NULL),
    folders = (SELECT COUNT(*) FROM objects WHERE kind = 'folder' AND parent_id IS NOT NULL),
    trashed = (SELECT COUNT(*) FROM objects WHERE trashed_at IS NOT NULL AND parent_id IS NOT NULL),
    file_bytes = (SELECT COALESCE(SUM(size), 0) FROM objects WHERE kind = 'file' AND parent_id IS NOT NULL),
    blobs = (SELECT COUNT(*) FROM physical_files),
    blob_bytes = (SELECT COALESCE(SUM(size), 0) FROM physical_files)
WHERE shard = 0;

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

CREATE FUNCTION summary_objects_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s INTEGER := pg_backend_pid() % 16;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.parent_id IS NULL THEN RETURN NULL; END IF;
        -- The counters row first, then the day's: every transaction locks its shard's counters
        -- row before any other summary row, so they queue there and never cross.
        UPDATE summary_counters SET
            files = files + CASE WHEN NEW.kind = 'file' THEN 1 ELSE 0 END,
            folders = folders + CASE WHEN NEW.kind = 'folder' THEN 1 ELSE 0 END,
            trashed = trashed + CASE WHEN NEW.trashed_at IS NOT NULL THEN 1 ELSE 0 END,
            file_bytes = file_bytes + CASE WHEN NEW.kind = 'file' THEN NEW.size ELSE 0 END
        WHERE shard = s;
        IF NEW.kind = 'file' THEN
            INSERT INTO summary_daily (day, shard, uploads, upload_bytes)
                VALUES (NEW.created_at / 86400000, s, 1, NEW.size)
                ON CONFLICT (day, shard) DO UPDATE SET uploads = summary_daily.uploads + 1,
                    upload_bytes = summary_daily.upload_bytes + excluded.upload_bytes;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF OLD.parent_id IS NULL THEN RETURN NULL; END IF;
        UPDATE summary_counters SET
            files = files - CASE WHEN OLD.kind = 'file' THEN 1 ELSE 0 END,
            folders = folders - CASE WHEN OLD.kind = 'folder' THEN 1 ELSE 0 END,
            trashed = trashed - CASE WHEN OLD.trashed_at IS NOT NULL THEN 1 ELSE 0 END,
            file_bytes = file_bytes - CASE WHEN OLD.kind = 'file' THEN OLD.size ELSE 0 END
        WHERE shard = s;
    ELSE
        IF NEW.parent_id IS NULL
            OR (NEW.size = OLD.size AND (NEW.trashed_at IS NULL) = (OLD.trashed_at IS NULL)) THEN
            RETURN NULL;
        END IF;
        UPDATE summary_counters SET
            trashed = trashed + CASE WHEN NEW.trashed_at IS NOT NULL THEN 1 ELSE 0 END
                - CASE WHEN OLD.trashed_at IS NOT NULL THEN 1 ELSE 0 END,
            file_bytes = file_bytes + CASE WHEN NEW.kind = 'file' THEN NEW.size - OLD.size ELSE 0 END
        WHERE shard = s;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER summary_objects AFTER INSERT OR DELETE OR UPDATE OF size, trashed_at ON objects
    FOR EACH ROW EXECUTE FUNCTION summary_objects_changed();

CREATE FUNCTION summary_blobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s INTEGER := pg_backend_pid() % 16;
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE summary_counters SET blobs = blobs + 1, blob_bytes = blob_bytes + NEW.size WHERE shard = s;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE summary_counters SET blobs = blobs - 1, blob_bytes = blob_bytes - OLD.size WHERE shard = s;
    ELSIF NEW.size <> OLD.size THEN
        UPDATE summary_counters SET blob_bytes = blob_bytes + NEW.size - OLD.size WHERE shard = s;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER summary_blobs AFTER INSERT OR DELETE OR UPDATE OF size ON physical_files
    FOR EACH ROW EXECUTE FUNCTION summary_blobs_changed();

-- New accounts in the last day/week and registrations per day read a range of this index.
CREATE INDEX users_created ON users (created_at);
