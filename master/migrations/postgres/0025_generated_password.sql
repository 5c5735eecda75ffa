-- A password the server generated (the first administrator's, printed once in the log) is
-- marked until its owner chooses another, so the web app can ask them to. Setting any password
-- clears the mark.
ALTER TABLE auth_identities ADD COLUMN generated INTEGER NOT NULL DEFAULT 0 CHECK (generated IN (0, 1));
