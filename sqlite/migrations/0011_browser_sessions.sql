-- People signed in through a browser. The cookie holds a random token; the
-- row keeps only its SHA-256 hash (token_hash), which finds the session
-- before anything names the organization, so it is unique across
-- organizations. roles is a JSON array of strings, as a credential's.
-- idle_until never passes expires_at: the sweep reads idle_until alone.
CREATE TABLE browser_sessions (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	token_hash      TEXT NOT NULL UNIQUE,
	subject         TEXT NOT NULL,
	method          TEXT NOT NULL,
	credential_id   TEXT NOT NULL,
	roles           TEXT NOT NULL CHECK (json_valid(roles) AND json_type(roles) = 'array'),
	created_at      INTEGER NOT NULL,
	idle_until      INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) WITHOUT ROWID;

-- DeleteBrowserSessionsOf: every session of one person.
CREATE INDEX browser_sessions_by_subject ON browser_sessions (organization_id, subject);
-- DeleteExpiredBrowserSessions: the oldest ends first, across organizations.
CREATE INDEX browser_sessions_by_idle ON browser_sessions (idle_until);
