-- The administration summary (`GET /admin/summary`) reads these instead of aggregating the
-- objects and blobs tables on each request (a million objects take a scan of the table or an
-- index); triggers keep them true on every write path (uploads, WebDAV, copies, purges,
-- cascades from deleted users), so no service code has to remember them.
-- Writers never update a counter row here: each changed object or blob appends its change to
-- `summary_deltas`, and a periodic job (and each summary read) folds the rows into
-- `summary_counters` and `summary_daily` in one statement. Updating one row per write would
-- make concurrent writers queue on it, and a transaction that writes many objects would update
-- it again and again, which PostgreSQL makes quadratic (each update walks the chain of the
-- row's versions the transaction left: 20,000 updates of one row took 19 s). Readers add the
-- deltas not folded yet. Root folders (no parent: one per user) are not counted.
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
INSERT INTO summary_counters (shard, files, folders, trashed, file_bytes, blobs, blob_bytes) SELECT 0,
    (SELECT COUNT(*) FROM objects WHERE kind = 'file' AND parent_id IS NOT NULL),
    (SELECT COUNT(*) FROM objects WHERE kind = 'folder' AND parent_id IS NOT NULL),
    (SELECT COUNT(*) FROM objects WHERE trashed_at IS NOT NULL AND parent_id IS NOT NULL),
    (SELECT COALESCE(SUM(size), 0) FROM objects WHERE kind = 'file' AND parent_id IS NOT NULL),
    (SELECT COUNT(*) FROM physical_files),
    (SELECT COALESCE(SUM(size), 0) FROM physical_files);

-- Files added per UTC day (`created_at / 86400000`): uploads, copies and saves from shares,
-- with their sizes when added. A history: deleting a file later does not take it back.
-- (`shard` is always 0 here; the table has SQLite's shape so one query reads both.)
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

-- Changes not folded yet; no index (appends stay cheap, the fold takes every row).
CREATE TABLE summary_deltas (
    files         BIGINT NOT NULL DEFAULT 0,
    folders       BIGINT NOT NULL DEFAULT 0,
    trashed       BIGINT NOT NULL DEFAULT 0,
    file_bytes    BIGINT NOT NULL DEFAULT 0,
    blobs         BIGINT NOT NULL DEFAULT 0,
    blob_bytes    BIGINT NOT NULL DEFAULT 0,
    -- The UTC day of an added file, with `uploads` 1 and its size; NULL otherwise.
    day           BIGINT,
    uploads       BIGINT NOT NULL DEFAULT 0,
    upload_bytes  BIGINT NOT NULL DEFAULT 0
);

CREATE FUNCTION summary_objects_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.parent_id IS NULL THEN RETURN NULL; END IF;
        INSERT INTO summary_deltas (files, folders, trashed, file_bytes, day, uploads, upload_bytes) VALUES (
            CASE WHEN NEW.kind = 'file' THEN 1 ELSE 0 END,
            CASE WHEN NEW.kind = 'folder' THEN 1 ELSE 0 END,
            CASE WHEN NEW.trashed_at IS NOT NULL THEN 1 ELSE 0 END,
            CASE WHEN NEW.kind = 'file' THEN NEW.size ELSE 0 END,
            CASE WHEN NEW.kind = 'file' THEN NEW.created_at / 86400000 END,
            CASE WHEN NEW.kind = 'file' THEN 1 ELSE 0 END,
            CASE WHEN NEW.kind = 'file' THEN NEW.size ELSE 0 END);
    ELSIF TG_OP = 'DELETE' THEN
        IF OLD.parent_id IS NULL THEN RETURN NULL; END IF;
        INSERT INTO summary_deltas (files, folders, trashed, file_bytes) VALUES (
            CASE WHEN OLD.kind = 'file' THEN -1 ELSE 0 END,
            CASE WHEN OLD.kind = 'folder' THEN -1 ELSE 0 END,
            CASE WHEN OLD.trashed_at IS NOT NULL THEN -1 ELSE 0 END,
            CASE WHEN OLD.kind = 'file' THEN -OLD.size ELSE 0 END);
    ELSE
        IF NEW.parent_id IS NULL
            OR (NEW.size = OLD.size AND (NEW.trashed_at IS NULL) = (OLD.trashed_at IS NULL)) THEN
            RETURN NULL;
        END IF;
        INSERT INTO summary_deltas (trashed, file_bytes) VALUES (
            CASE WHEN NEW.trashed_at IS NOT NULL THEN 1 ELSE 0 END
                - CASE WHEN OLD.trashed_at IS NOT NULL THEN 1 ELSE 0 END,
            CASE WHEN NEW.kind = 'file' THEN NEW.size - OLD.size ELSE 0 END);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER summary_objects AFTER INSERT OR DELETE OR UPDATE OF size, trashed_at ON objects
    FOR EACH ROW EXECUTE FUNCTION summary_objects_changed();

CREATE FUNCTION summary_blobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO summary_deltas (blobs, blob_bytes) VALUES (1, NEW.size);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO summary_deltas (blobs, blob_bytes) VALUES (-1, -OLD.size);
    ELSIF NEW.size <> OLD.size THEN
        INSERT INTO summary_deltas (blob_bytes) VALUES (NEW.size - OLD.size);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER summary_blobs AFTER INSERT OR DELETE OR UPDATE OF size ON physical_files
    FOR EACH ROW EXECUTE FUNCTION summary_blobs_changed();

-- New accounts in the last day/week and registrations per day read a range of this index.
CREATE INDEX users_created ON users (created_at);
