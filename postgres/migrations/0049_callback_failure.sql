-- Where a failing callback stands, where the API reads it: why the last
-- delivery attempt failed (a short reason naming no part of the URL but
-- its host, which a receiver may have put a token in) and when the next
-- is due (microseconds; NULL when none is, or it is not known).
ALTER TABLE async_calls ADD COLUMN callback_error TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE async_calls ADD COLUMN callback_next_at BIGINT;
