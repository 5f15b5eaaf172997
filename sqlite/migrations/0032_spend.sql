-- The agent whose call a usage row counts, for spend reports by agent;
-- rows written before it read as the empty agent.
ALTER TABLE usage ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';

-- SpendReport reads a time range of an organization's rows from this
-- index alone.
CREATE INDEX usage_by_time ON usage (organization_id, created_at, agent_id, tool, cost_cents);

-- An organization's ceiling on one UTC day's spend.
CREATE TABLE spend_ceilings (
	organization_id TEXT NOT NULL PRIMARY KEY,
	daily_cents     INTEGER NOT NULL CHECK (daily_cents > 0),
	updated_by      TEXT NOT NULL,
	updated_at      INTEGER NOT NULL
) STRICT;

-- What an organization's usage rows cost, per UTC day (days since the
-- epoch), written in the transaction of each row: the daily ceiling is
-- checked against one row, not a sum over the day's usage.
CREATE TABLE spend_days (
	organization_id TEXT NOT NULL,
	day             INTEGER NOT NULL,
	cost_cents      INTEGER NOT NULL,
	calls           INTEGER NOT NULL,
	PRIMARY KEY (organization_id, day)
) STRICT;
