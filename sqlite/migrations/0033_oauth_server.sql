-- The OAuth authorization server's state (package authserver). Clients
-- are server-wide (registration is anonymous); what an organization
-- decides about one is its oauth_client_settings row. Codes and refresh
-- tokens are kept by the SHA-256 of their value, never in clear, and are
-- found by it alone; each carries its organization and grant.
CREATE TABLE oauth_clients (
	id            TEXT NOT NULL PRIMARY KEY,
	name          TEXT NOT NULL,
	redirect_uris TEXT NOT NULL,
	source        TEXT NOT NULL,
	created_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX oauth_clients_by_created ON oauth_clients (created_at DESC);

CREATE TABLE oauth_client_settings (
	organization_id TEXT NOT NULL,
	client_id       TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	revoked_at      INTEGER,
	updated_by      TEXT NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, client_id)
) WITHOUT ROWID;

CREATE TABLE oauth_grants (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	client_id       TEXT NOT NULL,
	subject         TEXT NOT NULL,
	roles           TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	tools           TEXT NOT NULL,
	resource        TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	revoked_at      INTEGER,
	revoked_reason  TEXT NOT NULL,
	-- person_key: the person's API key they consented with ('' for the
	-- OpenID provider), checked as it is now at every call.
	person_key      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (organization_id, id)
) WITHOUT ROWID;
CREATE INDEX oauth_grants_by_subject ON oauth_grants (organization_id, subject, created_at DESC);
CREATE INDEX oauth_grants_by_client ON oauth_grants (organization_id, client_id);

CREATE TABLE oauth_codes (
	hash            TEXT NOT NULL PRIMARY KEY,
	organization_id TEXT NOT NULL,
	grant_id        TEXT NOT NULL,
	client_id       TEXT NOT NULL,
	redirect_uri    TEXT NOT NULL,
	challenge       TEXT NOT NULL,
	expires_at      INTEGER NOT NULL,
	used_at         INTEGER
) WITHOUT ROWID;
CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at);

CREATE TABLE oauth_refresh_tokens (
	hash            TEXT NOT NULL PRIMARY KEY,
	organization_id TEXT NOT NULL,
	grant_id        TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	used_at         INTEGER
) WITHOUT ROWID;
CREATE INDEX oauth_refresh_tokens_by_expiry ON oauth_refresh_tokens (expires_at);

-- Access-token signing keys: the private half sealed (package secret).
CREATE TABLE oauth_signing_keys (
	id         TEXT NOT NULL PRIMARY KEY,
	sealed     BLOB NOT NULL,
	public     BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	retired_at INTEGER
) WITHOUT ROWID;
