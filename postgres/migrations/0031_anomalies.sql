-- Anomaly triage (toolplane.AnomalyBaseline, toolplane.Anomaly, package
-- anomaly). Times are BIGINT unix microseconds UTC.
--
-- One baseline per organization, agent and tool: per signal (calls,
-- denials, errors, spend) the exponentially weighted mean and variance of
-- the windows folded in, and the start of the last one, so a window is
-- folded in once whichever node runs it.
CREATE TABLE anomaly_baselines (
	organization_id TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	tool            TEXT COLLATE "C" NOT NULL,
	bucket          BIGINT NOT NULL,
	buckets         BIGINT NOT NULL,
	last_active     BIGINT NOT NULL,
	calls_mean      DOUBLE PRECISION NOT NULL,
	calls_var       DOUBLE PRECISION NOT NULL,
	denials_mean    DOUBLE PRECISION NOT NULL,
	denials_var     DOUBLE PRECISION NOT NULL,
	errors_mean     DOUBLE PRECISION NOT NULL,
	errors_var      DOUBLE PRECISION NOT NULL,
	spend_mean      DOUBLE PRECISION NOT NULL,
	spend_var       DOUBLE PRECISION NOT NULL,
	PRIMARY KEY (organization_id, agent_id, tool)
);

-- Retention removes baselines idle long enough.
CREATE INDEX anomaly_baselines_by_activity ON anomaly_baselines (last_active);

-- The triage items. At most one open item per organization, agent, tool
-- and signal: a deviation that goes on updates it.
CREATE TABLE anomalies (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	tool            TEXT COLLATE "C" NOT NULL,
	signal          TEXT COLLATE "C" NOT NULL,
	observed        DOUBLE PRECISION NOT NULL,
	mean            DOUBLE PRECISION NOT NULL,
	stddev          DOUBLE PRECISION NOT NULL,
	score           DOUBLE PRECISION NOT NULL,
	window_start    BIGINT NOT NULL,
	window_end      BIGINT NOT NULL,
	windows         INTEGER NOT NULL,
	status          TEXT COLLATE "C" NOT NULL CHECK (status IN ('open', 'acknowledged')),
	acknowledged_by TEXT COLLATE "C" NOT NULL,
	acknowledged_at BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

CREATE UNIQUE INDEX anomalies_one_open ON anomalies (organization_id, agent_id, tool, signal) WHERE status = 'open';
CREATE INDEX anomalies_by_time ON anomalies (organization_id, created_at, id);
CREATE INDEX anomalies_by_status ON anomalies (organization_id, status, created_at, id);

-- How far the triage has folded the audit trail in: one row, the end of
-- the last window, advanced compare-and-swap.
CREATE TABLE anomaly_watermark (
	id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	bucket_end BIGINT NOT NULL
);

-- The tallies read a time range across organizations.
CREATE INDEX audit_events_by_created ON audit_events (created_at);
