-- Every object's name in the form searches compare (`domain::object::search_key`: Unicode lower
-- case, composed), written by the master with the name; rows from before are filled at start.
-- The "C" collation orders keys by bytes, as SQLite does, so both answer in the same order and
-- the index serves that order.
ALTER TABLE objects ADD COLUMN name_key TEXT COLLATE "C";
-- A search scans one owner's live keys in this index in key order (the order it answers in),
-- testing each key against the pattern without reading the table, and stops at the page's end.
-- `parent_id` (for searches below a folder) and `trashed_at` (always NULL here) are columns too,
-- so SQLite counts matches from the index alone.
CREATE INDEX objects_search ON objects (owner_id, name_key, kind, id, parent_id, trashed_at) WHERE trashed_at IS NULL;
-- An object's tags are looked up by object (listings), and deleting an object deletes its links.
CREATE INDEX object_tags_object ON object_tags (object_id);
-- Substring searches of three characters or more find their matches through trigrams, where
-- the pg_trgm extension (in PostgreSQL's contrib) can be enabled; without it they scan the index
-- above, which is correct and slower (see docs/benchmarks.md).
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm cannot be enabled (%): searches scan objects_search', SQLERRM;
END
$$;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX objects_search_trigrams ON objects USING gin (name_key gin_trgm_ops) WHERE trashed_at IS NULL;
    END IF;
END
$$;
