-- Anomaly triage (toolplane.AnomalyBaseline, toolplane.Anomaly, package
-- anomaly). Times are INTEGER unix microseconds UTC.
--
-- One baseline per organization, agent and tool: per signal (calls,
-- denials, errors, spend) the exponentially weighted mean and variance of
-- the windows folded in, and the start of the last one, so a window is
-- folded in once whichever node runs it.
CREATE TABLE anomaly_baselines (
	organization_id TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	tool            TEXT NOT NULL,
	bucket          INTEGER NOT NULL,
	buckets         INTEGER NOT NULL,
	last_active     INTEGER NOT NULL,
	calls_mean      REAL NOT NULL,
	calls_var       REAL NOT NULL,
	denials_mean    REAL NOT NULL,
	denials_var     REAL NOT NULL,
	errors_mean     REAL NOT NULL,
	errors_var      REAL NOT NULL,
	spend_mean      REAL NOT NULL,
	spend_var       REAL NOT NULL,
	PRIMARY KEY (organization_id, agent_id, tool)
) STRICT, WITHOUT ROWID;

-- Retention removes baselines idle long enough.
CREATE INDEX anomaly_baselines_by_activity ON anomaly_baselines (last_active);

-- The triage items. At most one open item per organization, agent, tool
-- and signal: a deviation that goes on updates it.
CREATE TABLE anomalies (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	tool            TEXT NOT NULL,
	signal          TEXT NOT NULL,
	observed        REAL NOT NULL,
	mean            REAL NOT NULL,
	stddev          REAL NOT NULL,
	score           REAL NOT NULL,
	window_start    INTEGER NOT NULL,
	window_end      INTEGER NOT NULL,
	windows         INTEGER NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('open', 'acknowledged')),
	acknowledged_by TEXT NOT NULL,
	acknowledged_at INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX anomalies_one_open ON anomalies (organization_id, agent_id, tool, signal) WHERE status = 'open';
CREATE INDEX anomalies_by_time ON anomalies (organization_id, created_at, id);
CREATE INDEX anomalies_by_status ON anomalies (organization_id, status, created_at, id);

-- How far the triage has folded the audit trail in: one row, the end of
-- the last window, advanced compare-and-swap.
CREATE TABLE anomaly_watermark (
	id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	bucket_end INTEGER NOT NULL
) STRICT;

-- The tallies read a time range across organizations.
CREATE INDEX audit_events_by_created ON audit_events (created_at);
