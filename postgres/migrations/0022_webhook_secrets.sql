-- Each organization's callback signing secret: the current one and, for a
-- grace period after a rotation, the previous one. Both are sealed
-- (package secret), never in clear; previous_until is NULL when there is
-- no previous secret.
CREATE TABLE webhook_secrets (
	organization_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	current_id      TEXT COLLATE "C" NOT NULL,
	current_secret  BYTEA NOT NULL,
	created_at      BIGINT NOT NULL,
	previous_id     TEXT COLLATE "C" NOT NULL,
	previous_secret BYTEA,
	previous_until  BIGINT,
	rotated_by      TEXT COLLATE "C" NOT NULL,
	version         BIGINT NOT NULL
);
