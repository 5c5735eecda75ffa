-- Change events of each user's tree (`GET /events`): one row per change of an object, written by
-- triggers on `objects`, so every write path (REST, WebDAV, WOPI, uploads, copies, purges, jobs)
-- records its changes in its own transaction and no service code has to remember them. `seq` is
-- the cursor clients resume from. Root folders (one per user) are not reported.
-- `change_event_floor.seq`: every event up to it has been pruned (a cursor below it is too old).
CREATE TABLE change_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id     TEXT NOT NULL,
    kind         TEXT NOT NULL,
    object_id    TEXT NOT NULL,
    object_kind  TEXT NOT NULL,
    parent_id    TEXT,
    name         TEXT NOT NULL,
    at           BIGINT NOT NULL
);
CREATE INDEX change_events_owner ON change_events (owner_id, seq);
CREATE INDEX change_events_at ON change_events (at);
CREATE TABLE change_event_floor (id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL);
INSERT INTO change_event_floor (id, seq) VALUES (1, 0);

CREATE TRIGGER change_object_insert AFTER INSERT ON objects WHEN NEW.parent_id IS NOT NULL
BEGIN
    INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
    VALUES (NEW.owner_id, 'created', NEW.id, NEW.kind, NEW.parent_id, NEW.name,
            CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

CREATE TRIGGER change_object_delete AFTER DELETE ON objects WHEN OLD.parent_id IS NOT NULL
BEGIN
    INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
    VALUES (OLD.owner_id, 'deleted', OLD.id, OLD.kind, OLD.parent_id, OLD.name,
            CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
END;

-- One update may be several changes (a restore into another folder under another name): each
-- is reported, in this order.
CREATE TRIGGER change_object_update AFTER UPDATE OF parent_id, name, trashed_at, physical_file_id, size ON objects
WHEN NEW.parent_id IS NOT NULL
BEGIN
    INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
    SELECT NEW.owner_id, change.kind, NEW.id, NEW.kind, NEW.parent_id, NEW.name,
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (
        SELECT 1 AS position, 'trashed' AS kind WHERE OLD.trashed_at IS NULL AND NEW.trashed_at IS NOT NULL
        UNION ALL SELECT 2, 'restored' WHERE OLD.trashed_at IS NOT NULL AND NEW.trashed_at IS NULL
        UNION ALL SELECT 3, 'moved' WHERE OLD.parent_id IS NOT NEW.parent_id
        UNION ALL SELECT 4, 'renamed' WHERE OLD.name <> NEW.name
        UNION ALL SELECT 5, 'modified'
            WHERE OLD.physical_file_id IS NOT NEW.physical_file_id OR OLD.size <> NEW.size
    ) change ORDER BY change.position;
END;
