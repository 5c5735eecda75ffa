-- The blob an overwrite was asked to replace (`replaces_blake3`): the upload completes only
-- while the file still has it, so a change made meanwhile is never overwritten.
ALTER TABLE upload_sessions ADD COLUMN replace_blob_id TEXT;
