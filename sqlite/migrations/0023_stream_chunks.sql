-- The chunks an asynchronous call's handler emitted while it ran, bounded
-- and redacted, numbered from 1 in the order emitted: the stream a client
-- reads, and reads again after a lost connection, from any node. They go
-- with their call when retention removes it.
CREATE TABLE async_stream_chunks (
	organization_id TEXT NOT NULL,
	call_id         TEXT NOT NULL,
	seq             INTEGER NOT NULL,
	cut             INTEGER NOT NULL,
	data            BLOB NOT NULL,
	truncated       INTEGER NOT NULL,
	untrusted       INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, call_id, seq),
	FOREIGN KEY (organization_id, call_id) REFERENCES async_calls (organization_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
