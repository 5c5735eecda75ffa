-- Names are unique among the live children of a folder, and a folder's children share its
-- owner. Keying the uniqueness index on (parent_id, name) instead of (owner_id, parent_id, name)
-- lets every look-up by folder and name (each step of a path) use it; before, such a look-up
-- searched the listing index by folder and read every child until the name matched.
DROP INDEX objects_live_name;
CREATE UNIQUE INDEX objects_live_name ON objects (parent_id, name) WHERE trashed_at IS NULL;
