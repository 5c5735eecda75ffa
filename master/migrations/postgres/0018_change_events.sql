-- Change events of each user's tree (`GET /events`): one row per change of an object, written by
-- a trigger on `objects`, so every write path (REST, WebDAV, WOPI, uploads, copies, purges, jobs)
-- records its changes in its own transaction and no service code has to remember them. `seq` is
-- the cursor clients resume from. Root folders (one per user) are not reported.
-- `change_event_floor.seq`: every event up to it has been pruned (a cursor below it is too old).
CREATE TABLE change_events (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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

CREATE FUNCTION change_objects_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    now_ms BIGINT := (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.parent_id IS NOT NULL THEN
            INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
            VALUES (NEW.owner_id, 'created', NEW.id, NEW.kind, NEW.parent_id, NEW.name, now_ms);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF OLD.parent_id IS NOT NULL THEN
            INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
            VALUES (OLD.owner_id, 'deleted', OLD.id, OLD.kind, OLD.parent_id, OLD.name, now_ms);
        END IF;
        RETURN NULL;
    END IF;
    IF NEW.parent_id IS NULL THEN
        RETURN NULL;
    END IF;
    -- One update may be several changes (a restore into another folder under another name):
    -- each is reported, in this order.
    IF OLD.trashed_at IS NULL AND NEW.trashed_at IS NOT NULL THEN
        INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
        VALUES (NEW.owner_id, 'trashed', NEW.id, NEW.kind, NEW.parent_id, NEW.name, now_ms);
    END IF;
    IF OLD.trashed_at IS NOT NULL AND NEW.trashed_at IS NULL THEN
        INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
        VALUES (NEW.owner_id, 'restored', NEW.id, NEW.kind, NEW.parent_id, NEW.name, now_ms);
    END IF;
    IF OLD.parent_id IS DISTINCT FROM NEW.parent_id THEN
        INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
        VALUES (NEW.owner_id, 'moved', NEW.id, NEW.kind, NEW.parent_id, NEW.name, now_ms);
    END IF;
    IF OLD.name <> NEW.name THEN
        INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
        VALUES (NEW.owner_id, 'renamed', NEW.id, NEW.kind, NEW.parent_id, NEW.name, now_ms);
    END IF;
    IF OLD.physical_file_id IS DISTINCT FROM NEW.physical_file_id OR OLD.size <> NEW.size THEN
        INSERT INTO change_events (owner_id, kind, object_id, object_kind, parent_id, name, at)
        VALUES (NEW.owner_id, 'modified', NEW.id, NEW.kind, NEW.parent_id, NEW.name, now_ms);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER change_objects AFTER INSERT OR DELETE OR UPDATE OF parent_id, name, trashed_at, physical_file_id, size
    ON objects FOR EACH ROW EXECUTE FUNCTION change_objects_changed();
