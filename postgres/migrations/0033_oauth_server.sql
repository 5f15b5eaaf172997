-- The OAuth authorization server's state (package authserver). Clients
-- are server-wide (registration is anonymous); what an organization
-- decides about one is its oauth_client_settings row. Codes and refresh
-- tokens are kept by the SHA-256 of their value, never in clear, and are
-- found by it alone; each carries its organization and grant.
CREATE TABLE oauth_clients (
	id            TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	name          TEXT COLLATE "C" NOT NULL,
	redirect_uris TEXT COLLATE "C" NOT NULL,
	source        TEXT COLLATE "C" NOT NULL,
	created_at    BIGINT NOT NULL
);
CREATE INDEX oauth_clients_by_created ON oauth_clients (created_at DESC);

CREATE TABLE oauth_client_settings (
	organization_id TEXT COLLATE "C" NOT NULL,
	client_id       TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	revoked_at      BIGINT,
	updated_by      TEXT COLLATE "C" NOT NULL,
	updated_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, client_id)
);

CREATE TABLE oauth_grants (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	client_id       TEXT COLLATE "C" NOT NULL,
	subject         TEXT COLLATE "C" NOT NULL,
	roles           TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	tools           TEXT COLLATE "C" NOT NULL,
	resource        TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL,
	revoked_at      BIGINT,
	revoked_reason  TEXT COLLATE "C" NOT NULL,
	-- person_key: the person's API key they consented with ('' for the
	-- OpenID provider), checked as it is now at every call.
	person_key      TEXT COLLATE "C" NOT NULL DEFAULT '',
	PRIMARY KEY (organization_id, id)
);
CREATE INDEX oauth_grants_by_subject ON oauth_grants (organization_id, subject, created_at DESC);
CREATE INDEX oauth_grants_by_client ON oauth_grants (organization_id, client_id);

CREATE TABLE oauth_codes (
	hash            TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	organization_id TEXT COLLATE "C" NOT NULL,
	grant_id        TEXT COLLATE "C" NOT NULL,
	client_id       TEXT COLLATE "C" NOT NULL,
	redirect_uri    TEXT COLLATE "C" NOT NULL,
	challenge       TEXT COLLATE "C" NOT NULL,
	expires_at      BIGINT NOT NULL,
	used_at         BIGINT
);
CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at);

CREATE TABLE oauth_refresh_tokens (
	hash            TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	organization_id TEXT COLLATE "C" NOT NULL,
	grant_id        TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL,
	used_at         BIGINT
);
CREATE INDEX oauth_refresh_tokens_by_expiry ON oauth_refresh_tokens (expires_at);

-- Access-token signing keys: the private half sealed (package secret).
CREATE TABLE oauth_signing_keys (
	id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	sealed     BYTEA NOT NULL,
	public     BYTEA NOT NULL,
	created_at BIGINT NOT NULL,
	retired_at BIGINT
);
