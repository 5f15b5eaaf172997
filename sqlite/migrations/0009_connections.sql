-- Connections: how tools reach one downstream system for one organization
-- (toolplane.Connection), and the OAuth authorizations under way. Times are
-- INTEGER unix microseconds UTC (NULL where the zero time means "none"),
-- byte fields BLOB (NULL when empty), string lists JSON arrays.
--
-- config and scope are JSON objects: settings of a shape the platform
-- grows, read and written whole, never queried. secret is sealed before it
-- reaches the store; the store never sees it in clear.
CREATE TABLE connections (
	organization_id  TEXT NOT NULL,
	id               TEXT NOT NULL,
	name             TEXT NOT NULL,
	provider         TEXT NOT NULL,
	kind             TEXT NOT NULL,
	user_id          TEXT NOT NULL,
	state            TEXT NOT NULL,
	reason           TEXT NOT NULL,
	config           TEXT NOT NULL CHECK (json_valid(config) AND json_type(config) = 'object'),
	scope            TEXT NOT NULL CHECK (json_valid(scope) AND json_type(scope) = 'object'),
	scopes           TEXT NOT NULL CHECK (json_valid(scopes) AND json_type(scopes) = 'array'),
	secret           BLOB,
	token_expires_at INTEGER,
	refresh_owner    TEXT NOT NULL,
	refresh_until    INTEGER,
	owner            TEXT NOT NULL,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	revoked_at       INTEGER,
	version          INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- A name is an administrator's label, unique among the organization's
-- connections that are not revoked: revoking one frees its name.
CREATE UNIQUE INDEX connections_by_name ON connections (organization_id, name) WHERE state <> 'revoked';

-- ListConnections: oldest first, keyset-paged, all of an organization's or
-- those of one provider (what a tool declares it needs) or one person.
CREATE INDEX connections_by_time ON connections (organization_id, created_at, id);
CREATE INDEX connections_by_provider ON connections (organization_id, provider, created_at, id);
CREATE INDEX connections_by_user ON connections (organization_id, user_id, created_at, id);

-- ListAllConnections: every organization's, by ID.
CREATE INDEX connections_by_id ON connections (id, organization_id);

-- Authorizations started and not yet completed. The primary key is the id
-- alone: the provider's redirect carries only the state parameter, so the
-- callback finds the row by it before anything names the organization.
CREATE TABLE oauth_states (
	id              TEXT NOT NULL PRIMARY KEY,
	organization_id TEXT NOT NULL,
	connection_id   TEXT NOT NULL,
	user_id         TEXT NOT NULL,
	verifier        BLOB,
	redirect_uri    TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL
) STRICT;

-- An audit event names the connection whose secret was released for the
-- call, by ID; '' when none was (and for events from before this
-- migration).
ALTER TABLE audit_events ADD COLUMN connection_id TEXT NOT NULL DEFAULT '';
