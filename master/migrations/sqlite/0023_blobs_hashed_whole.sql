-- Whether the blob's blake3 was computed by the server over its stored bytes in one pass (a
-- streamed write, an import) rather than merged from per-chunk values: content of another
-- owner is de-duplicated only onto such a blob. Blobs from before are not known to be.
ALTER TABLE physical_files ADD COLUMN hashed_whole INTEGER NOT NULL DEFAULT 0;
