-- Connections: how tools reach one downstream system for one organization
-- (toolplane.Connection), and the OAuth authorizations under way. Times are
-- BIGINT unix microseconds UTC (NULL where the zero time means "none"),
-- byte fields BYTEA (NULL when empty), lists of names TEXT[] ('{}' when
-- empty, never NULL).
--
-- config and scope are JSON objects: settings of a shape the platform
-- grows, read and written whole, never queried. secret is sealed before it
-- reaches the store; the store never sees it in clear.
CREATE TABLE connections (
	organization_id  TEXT COLLATE "C" NOT NULL,
	id               TEXT COLLATE "C" NOT NULL,
	name             TEXT COLLATE "C" NOT NULL,
	provider         TEXT COLLATE "C" NOT NULL,
	kind             TEXT COLLATE "C" NOT NULL,
	user_id          TEXT COLLATE "C" NOT NULL,
	state            TEXT COLLATE "C" NOT NULL,
	reason           TEXT NOT NULL,
	config           JSONB NOT NULL CHECK (jsonb_typeof(config) = 'object'),
	scope            JSONB NOT NULL CHECK (jsonb_typeof(scope) = 'object'),
	scopes           TEXT[] COLLATE "C" NOT NULL,
	secret           BYTEA,
	token_expires_at BIGINT,
	refresh_owner    TEXT COLLATE "C" NOT NULL,
	refresh_until    BIGINT,
	owner            TEXT COLLATE "C" NOT NULL,
	created_at       BIGINT NOT NULL,
	updated_at       BIGINT NOT NULL,
	revoked_at       BIGINT,
	version          BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

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
	id              TEXT COLLATE "C" PRIMARY KEY,
	organization_id TEXT COLLATE "C" NOT NULL,
	connection_id   TEXT COLLATE "C" NOT NULL,
	user_id         TEXT COLLATE "C" NOT NULL,
	verifier        BYTEA,
	redirect_uri    TEXT NOT NULL,
	created_at      BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL
);

-- An audit event names the connection whose secret was released for the
-- call, by ID; '' when none was (and for events from before this
-- migration).
ALTER TABLE audit_events ADD COLUMN connection_id TEXT COLLATE "C" NOT NULL DEFAULT '';
