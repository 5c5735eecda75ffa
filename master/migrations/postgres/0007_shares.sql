-- A share keeps its download limit as a limit (the count is `downloads`), says whether visitors
-- may preview, and is found by its object (a share ends with its object; the object's owner
-- lists them).
ALTER TABLE shares DROP COLUMN remaining_downloads;
ALTER TABLE shares ADD COLUMN max_downloads BIGINT;
ALTER TABLE shares ADD COLUMN allow_preview INTEGER NOT NULL DEFAULT 1 CHECK (allow_preview IN (0, 1));
CREATE INDEX shares_object ON shares (object_id);
