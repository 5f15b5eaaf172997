-- The agent whose call a usage row counts, for spend reports by agent;
-- rows written before it read as the empty agent.
ALTER TABLE usage ADD COLUMN agent_id TEXT COLLATE "C" NOT NULL DEFAULT '';

-- SpendReport reads a time range of an organization's rows from this
-- index alone.
CREATE INDEX usage_by_time ON usage (organization_id, created_at) INCLUDE (agent_id, tool, cost_cents);

-- An organization's ceiling on one UTC day's spend.
CREATE TABLE spend_ceilings (
	organization_id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	daily_cents     BIGINT NOT NULL CHECK (daily_cents > 0),
	updated_by      TEXT COLLATE "C" NOT NULL,
	updated_at      BIGINT NOT NULL
);

-- What an organization's usage rows cost, per UTC day (days since the
-- epoch), written in the transaction of each row: the daily ceiling is
-- checked against one row, not a sum over the day's usage.
CREATE TABLE spend_days (
	organization_id TEXT COLLATE "C" NOT NULL,
	day             BIGINT NOT NULL,
	cost_cents      BIGINT NOT NULL,
	calls           BIGINT NOT NULL,
	PRIMARY KEY (organization_id, day)
);
