-- Calls accepted to run later, outside the request that made them: the
-- record is the truth of where each stands; a River job only moves it.
-- A call's key (its idempotency key, or the one derived for a write) makes
-- two submissions of one call one; a read submitted without a key has ''.
CREATE TABLE async_calls (
	organization_id   TEXT COLLATE "C" NOT NULL,
	id                TEXT COLLATE "C" NOT NULL,
	tool              TEXT COLLATE "C" NOT NULL,
	key               TEXT COLLATE "C" NOT NULL,
	agent_id          TEXT COLLATE "C" NOT NULL,
	arguments         BYTEA,
	invocation        BYTEA,
	status            TEXT COLLATE "C" NOT NULL,
	result            BYTEA,
	code              TEXT COLLATE "C" NOT NULL,
	approval_id       TEXT COLLATE "C" NOT NULL,
	cancel_requested  BOOLEAN NOT NULL,
	callback_url      TEXT COLLATE "C" NOT NULL,
	callback_state    TEXT COLLATE "C" NOT NULL,
	callback_attempts BIGINT NOT NULL,
	created_at        BIGINT NOT NULL,
	updated_at        BIGINT NOT NULL,
	started_at        BIGINT,
	ended_at          BIGINT,
	PRIMARY KEY (organization_id, id)
);
CREATE UNIQUE INDEX async_calls_one_per_key ON async_calls (organization_id, tool, key) WHERE key <> '';
-- The sweep's reads: calls still moving, or whose callback is due.
CREATE INDEX async_calls_stale ON async_calls (updated_at)
	WHERE status IN ('queued', 'running') OR callback_state = 'pending';
CREATE INDEX async_calls_ended ON async_calls (ended_at) WHERE ended_at IS NOT NULL;
