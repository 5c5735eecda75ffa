-- Reports of shares outlive the share: they copy its code, owner and object name, so an owner
-- deleting a reported share does not erase the report. An administrator's decision (`action`,
-- who, when) is recorded on the report; `action IS NULL` means it is still open. Nothing wrote
-- to the earlier `reports` table, so it is replaced rather than copied.
DROP TABLE reports;
CREATE TABLE reports (
    id           TEXT PRIMARY KEY NOT NULL,
    share_id     TEXT REFERENCES shares(id) ON DELETE SET NULL,
    share_code   TEXT NOT NULL,
    owner_id     TEXT REFERENCES users(id) ON DELETE SET NULL,
    object_name  TEXT NOT NULL,
    reporter_id  TEXT REFERENCES users(id) ON DELETE SET NULL,
    reason       TEXT NOT NULL CHECK (reason IN ('spam', 'illegal', 'copyright', 'malware', 'other')),
    description  TEXT NOT NULL DEFAULT '',
    action       TEXT CHECK (action IN ('dismiss', 'remove_share', 'ban_owner')),
    handled_by   TEXT REFERENCES users(id) ON DELETE SET NULL,
    handled_at   BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX reports_by_state ON reports (handled_at, created_at);
CREATE INDEX reports_share ON reports (share_id);

-- A share an administrator removed after a report: visitors get 404, the owner sees why.
ALTER TABLE shares ADD COLUMN removed_at BIGINT;
