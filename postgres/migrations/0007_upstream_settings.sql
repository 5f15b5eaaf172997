-- Runtime settings of upstream MCP tools: an operator's relaxation or
-- tightening of one remote tool (the upstreams file's fields, as JSON),
-- overriding the file's for the whole deployment. Every node reads the
-- table and applies what it finds, so a change needs no restart.
CREATE TABLE upstream_tool_settings (
	upstream   TEXT COLLATE "C" NOT NULL,
	tool       TEXT COLLATE "C" NOT NULL,
	settings   BYTEA NOT NULL,
	updated_by TEXT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (upstream, tool)
);
