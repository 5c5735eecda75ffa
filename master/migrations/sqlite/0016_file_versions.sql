-- File versions: a replaced content is kept as a version of its file, holding a reference to its
-- blob (so identical contents share one blob) and counted in the owner's used storage.
-- `created_at` is when that content was written, `replaced_at` when newer content took its place.
-- Groups say how many versions a file keeps and for how many days (0: no limit by age; a count
-- of 0 keeps none).
ALTER TABLE groups ADD COLUMN version_max_count INTEGER NOT NULL DEFAULT 10 CHECK (version_max_count >= 0);
ALTER TABLE groups ADD COLUMN version_max_days INTEGER NOT NULL DEFAULT 30 CHECK (version_max_days >= 0);

CREATE TABLE file_versions (
    id           TEXT PRIMARY KEY NOT NULL,
    object_id    TEXT NOT NULL REFERENCES objects(id) ON DELETE RESTRICT,
    blob_id      TEXT NOT NULL REFERENCES physical_files(id) ON DELETE RESTRICT,
    size         BIGINT NOT NULL CHECK (size >= 0),
    created_at   BIGINT NOT NULL,
    replaced_at  BIGINT NOT NULL
);
CREATE INDEX file_versions_object ON file_versions (object_id, replaced_at);
CREATE INDEX file_versions_replaced ON file_versions (replaced_at);
CREATE INDEX file_versions_blob ON file_versions (blob_id);
