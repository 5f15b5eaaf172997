-- Calls accepted to run later, outside the request that made them: the
-- record is the truth of where each stands; a River job only moves it.
-- A call's key (its idempotency key, or the one derived for a write) makes
-- two submissions of one call one; a read submitted without a key has ''.
CREATE TABLE async_calls (
	organization_id   TEXT NOT NULL,
	id                TEXT NOT NULL,
	tool              TEXT NOT NULL,
	key               TEXT NOT NULL,
	agent_id          TEXT NOT NULL,
	arguments         BLOB,
	invocation        BLOB,
	status            TEXT NOT NULL,
	result            BLOB,
	code              TEXT NOT NULL,
	approval_id       TEXT NOT NULL,
	cancel_requested  INTEGER NOT NULL,
	callback_url      TEXT NOT NULL,
	callback_state    TEXT NOT NULL,
	callback_attempts INTEGER NOT NULL,
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL,
	started_at        INTEGER,
	ended_at          INTEGER,
	PRIMARY KEY (organization_id, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX async_calls_one_per_key ON async_calls (organization_id, tool, key) WHERE key <> '';
-- The sweep's reads: calls still moving, or whose callback is due.
CREATE INDEX async_calls_stale ON async_calls (updated_at)
	WHERE status IN ('queued', 'running') OR callback_state = 'pending';
CREATE INDEX async_calls_ended ON async_calls (ended_at) WHERE ended_at IS NOT NULL;
