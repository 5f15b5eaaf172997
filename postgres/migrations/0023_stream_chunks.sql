-- The chunks an asynchronous call's handler emitted while it ran, bounded
-- and redacted, numbered from 1 in the order emitted: the stream a client
-- reads, and reads again after a lost connection, from any node. They go
-- with their call when retention removes it.
CREATE TABLE async_stream_chunks (
	organization_id TEXT COLLATE "C" NOT NULL,
	call_id         TEXT COLLATE "C" NOT NULL,
	seq             BIGINT NOT NULL,
	cut             BOOLEAN NOT NULL,
	data            BYTEA NOT NULL,
	truncated       BOOLEAN NOT NULL,
	untrusted       BOOLEAN NOT NULL,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, call_id, seq),
	FOREIGN KEY (organization_id, call_id) REFERENCES async_calls (organization_id, id) ON DELETE CASCADE
);
