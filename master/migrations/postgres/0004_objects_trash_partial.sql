-- Only trashed objects have a trash root, and every look-up through this index names one
-- (`trash_root_id = ...`). Indexing those alone keeps live objects out of it: creating a file
-- or folder no longer writes an entry (a page) here.
DROP INDEX objects_trash;
CREATE INDEX objects_trash ON objects (owner_id, trash_root_id) WHERE trash_root_id IS NOT NULL;
