-- The server's epoch: a random id made once, when the database is created. A sync client that
-- meets another epoch knows its agreements were made with another database and merges as on a
-- first run. A restore from a backup brings the old epoch back: that is noticed by the client's
-- cursor being beyond the newest event (`GET /events?since=` answers 409 `events.cursor_ahead`).
CREATE TABLE server_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), epoch TEXT NOT NULL);
INSERT INTO server_epoch (id, epoch) VALUES (1, lower(hex(randomblob(16))));
