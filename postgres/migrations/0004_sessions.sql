-- MCP sessions live here, not in one node's memory: any node, and a node
-- restarted, continues a session its client still holds. The identity is
-- the organization and the session id; contracts is a JSON object (tool
-- platform name to schema hash), client the initialize parameters (JSON).
CREATE TABLE mcp_sessions (
	organization_id  TEXT COLLATE "C" NOT NULL,
	id               TEXT COLLATE "C" NOT NULL,
	credential_id    TEXT COLLATE "C" NOT NULL,
	door             TEXT NOT NULL,
	protocol_version TEXT NOT NULL,
	client           BYTEA,
	run_id           TEXT NOT NULL,
	contracts        JSONB NOT NULL CHECK (jsonb_typeof(contracts) = 'object'),
	created_at       BIGINT NOT NULL,
	expires_at       BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- DeleteExpiredSessions: the oldest expiries first, across organizations.
CREATE INDEX mcp_sessions_by_expiry ON mcp_sessions (expires_at);
