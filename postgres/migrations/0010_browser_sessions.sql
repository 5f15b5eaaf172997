-- People signed in through a browser. The cookie holds a random token; the
-- row keeps only its SHA-256 hash (token_hash), which finds the session
-- before anything names the organization, so it is unique across
-- organizations. roles is TEXT[], as a credential's. idle_until never
-- passes expires_at: the sweep reads idle_until alone.
CREATE TABLE browser_sessions (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	token_hash      TEXT COLLATE "C" NOT NULL UNIQUE,
	subject         TEXT COLLATE "C" NOT NULL,
	method          TEXT NOT NULL,
	credential_id   TEXT COLLATE "C" NOT NULL,
	roles           TEXT[] COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	idle_until      BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- DeleteBrowserSessionsOf: every session of one person.
CREATE INDEX browser_sessions_by_subject ON browser_sessions (organization_id, subject);
-- DeleteExpiredBrowserSessions: the oldest ends first, across organizations.
CREATE INDEX browser_sessions_by_idle ON browser_sessions (idle_until);
