-- A claim on an upload session (`finishing` or `aborting`) carries a lease: the token of the
-- request that holds it and when it last renewed it. A claim whose lease ran out (its master
-- died half-way) can be taken over; the token fences the old holder out, since the session row
-- is only deleted by whoever holds the current token. Rows claimed before this migration have
-- no claim time and count as stale.
ALTER TABLE upload_sessions ADD COLUMN claim_token TEXT;
ALTER TABLE upload_sessions ADD COLUMN claimed_at BIGINT;
