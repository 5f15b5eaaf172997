-- Each organization's callback signing secret: the current one and, for a
-- grace period after a rotation, the previous one. Both are sealed
-- (package secret), never in clear; previous_until is NULL when there is
-- no previous secret.
CREATE TABLE webhook_secrets (
	organization_id TEXT NOT NULL PRIMARY KEY,
	current_id      TEXT NOT NULL,
	current_secret  BLOB NOT NULL,
	created_at      INTEGER NOT NULL,
	previous_id     TEXT NOT NULL,
	previous_secret BLOB,
	previous_until  INTEGER,
	rotated_by      TEXT NOT NULL,
	version         INTEGER NOT NULL
) WITHOUT ROWID;
