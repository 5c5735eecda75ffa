-- Every object's name in the form searches compare (`domain::object::search_key`: Unicode lower
-- case, composed), written by the master with the name; rows from before are filled at start.
-- SQLite's own lower() folds A-Z only, so the folding cannot be left to the database.
ALTER TABLE objects ADD COLUMN name_key TEXT;
-- A search scans one owner's live keys in this index in key order (the order it answers in),
-- testing each key against the pattern without reading the table, and stops at the page's end.
-- `parent_id` (for searches below a folder) and `trashed_at` (always NULL here) are columns too,
-- so SQLite counts matches from the index alone.
CREATE INDEX objects_search ON objects (owner_id, name_key, kind, id, parent_id, trashed_at) WHERE trashed_at IS NULL;
-- An object's tags are looked up by object (listings), and deleting an object deletes its links.
CREATE INDEX object_tags_object ON object_tags (object_id);
