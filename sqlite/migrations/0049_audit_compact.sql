-- Storage per call, second pass (issue 35). The audit trail's row and the
-- indexes every event pays, leaner:
--
-- * The hex columns (the arguments' hash, the output's, the trace and span
--   ids) hold the bytes their digits spell, half the size, when the value
--   is exactly its prefix and its count of lowercase hex digits; a derived
--   idempotency key, which ends with a hash's 64 digits, holds the text
--   before them and their bytes. Any other value stays the text it was.
--   Readers read a BLOB back as the prefix (or the text) and the bytes in
--   lowercase hex (sqlstore.HexRead), so every value, of a row stored
--   before or after, reads back byte for byte. The columns are ANY to hold
--   either (a STRICT TEXT column refuses a BLOB).
-- * audit_events_by_run no longer ends with the event's id (39 bytes an
--   entry): an entry already ends with the row's rowid, and the rare
--   events of one organization created in the same microsecond are
--   ordered by id from their rows.
-- * audit_events_by_time is gone: audit_events_traffic, which leads with
--   the same (organization, time), holds every event now, its kind in it,
--   and serves the list's reads too. The overview's reads stay within it.
-- * audit_events_by_created (0031) is gone: the anomaly triage's tally
--   reads the trail organization by organization, by the traffic index
--   (sqlstore.TallyAuditByOrganization), which holds all it reads.
--
-- The chain's hash covers the event, not its stored form: the chain is
-- unchanged. SQLite changes a column's type only by rebuilding the table:
-- the rows are copied with their rowids, then the indexes and triggers
-- are made again as they were. The triggers of audit_retention name the
-- table and would not survive its being dropped and renamed: they are
-- made again too.
DROP TRIGGER audit_retention_at_checkpoint;
DROP TRIGGER audit_retention_whole;

CREATE TABLE audit_events_compact (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	run_id          TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	principal_id    TEXT NOT NULL,
	user_id         TEXT NOT NULL,
	tool            TEXT NOT NULL,
	tool_version    TEXT NOT NULL,
	source          TEXT NOT NULL,
	outcome         TEXT NOT NULL,
	arguments_hash  ANY NOT NULL,
	approval_id     TEXT NOT NULL,
	authorized_by   TEXT NOT NULL,
	replayed        INTEGER NOT NULL CHECK (replayed IN (0, 1)),
	latency_micros  INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	key             ANY NOT NULL DEFAULT '',
	reason          TEXT NOT NULL DEFAULT '',
	connection_id   TEXT NOT NULL DEFAULT '',
	policy_decision TEXT NOT NULL DEFAULT '',
	policy_bundle   INTEGER NOT NULL DEFAULT 0,
	policy_rule     TEXT NOT NULL DEFAULT '',
	policy_degraded INTEGER NOT NULL DEFAULT 0 CHECK (policy_degraded IN (0, 1)),
	policy_input    BLOB,
	parent_id       TEXT NOT NULL DEFAULT '',
	kind            TEXT NOT NULL DEFAULT '',
	subject         TEXT NOT NULL DEFAULT '',
	tenant_id       TEXT NOT NULL DEFAULT '',
	step_path       TEXT NOT NULL DEFAULT '',
	key_id          TEXT NOT NULL DEFAULT '',
	effect          TEXT NOT NULL DEFAULT '',
	destructive     INTEGER NOT NULL DEFAULT 0,
	trace_id        ANY NOT NULL DEFAULT '',
	span_id         ANY NOT NULL DEFAULT '',
	approver_id     TEXT NOT NULL DEFAULT '',
	arguments       BLOB,
	pii_fields      TEXT NOT NULL DEFAULT '',
	classifications TEXT NOT NULL DEFAULT '',
	output_hash     ANY NOT NULL DEFAULT '',
	cost_cents      INTEGER NOT NULL DEFAULT 0,
	attempts        INTEGER NOT NULL DEFAULT 0,
	seq             INTEGER NOT NULL DEFAULT 0,
	prev_hash       BLOB,
	hash            BLOB,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- A value is converted only when it is exactly the prefix and the digits
-- (sqlstore.PackHex's test): then lower(hex(unhex(digits))) is the
-- digits again.
INSERT INTO audit_events_compact (rowid, organization_id, id, run_id, agent_id, principal_id, user_id, tool,
	tool_version, source, outcome, arguments_hash, approval_id, authorized_by,
	replayed, latency_micros, created_at, key, reason, connection_id,
	policy_decision, policy_bundle, policy_rule, policy_degraded, policy_input, parent_id,
	kind, subject, tenant_id, step_path, key_id, effect, destructive, trace_id, span_id,
	approver_id, arguments, pii_fields, classifications, output_hash, cost_cents, attempts,
	seq, prev_hash, hash)
SELECT rowid, organization_id, id, run_id, agent_id, principal_id, user_id, tool,
	tool_version, source, outcome,
	CASE WHEN length(arguments_hash) = 64 AND arguments_hash NOT GLOB '*[^0-9a-f]*'
			AND instr(CAST(arguments_hash AS BLOB), x'00') = 0
		THEN unhex(arguments_hash) ELSE arguments_hash END,
	approval_id, authorized_by,
	replayed, latency_micros, created_at,
	-- A text holding a NUL byte is kept as it is: length, substr and GLOB
	-- stop at the first NUL, and would cut what follows it.
	-- The text before the digits (counted in characters, as a text's
	-- length and substr count) as its UTF-8 bytes, then the digits' bytes:
	-- unhex of both in hex, since || answers a text.
	CASE WHEN length(key) >= 64 AND substr(key, -64) NOT GLOB '*[^0-9a-f]*'
			AND instr(CAST(key AS BLOB), x'00') = 0
		THEN unhex(hex(substr(key, 1, length(key) - 64)) || substr(key, -64)) ELSE key END,
	reason, connection_id,
	policy_decision, policy_bundle, policy_rule, policy_degraded, policy_input, parent_id,
	kind, subject, tenant_id, step_path, key_id, effect, destructive,
	CASE WHEN length(trace_id) = 32 AND trace_id NOT GLOB '*[^0-9a-f]*'
			AND instr(CAST(trace_id AS BLOB), x'00') = 0
		THEN unhex(trace_id) ELSE trace_id END,
	CASE WHEN length(span_id) = 16 AND span_id NOT GLOB '*[^0-9a-f]*'
			AND instr(CAST(span_id AS BLOB), x'00') = 0
		THEN unhex(span_id) ELSE span_id END,
	approver_id, arguments, pii_fields, classifications,
	CASE WHEN length(output_hash) = 71 AND substr(output_hash, 1, 7) = 'sha256:'
			AND substr(output_hash, 8) NOT GLOB '*[^0-9a-f]*'
			AND instr(CAST(output_hash AS BLOB), x'00') = 0
		THEN unhex(substr(output_hash, 8)) ELSE output_hash END,
	cost_cents, attempts,
	seq, prev_hash, hash
FROM audit_events;

DROP TABLE audit_events;
ALTER TABLE audit_events_compact RENAME TO audit_events;

-- ListAudit: newest first, keyset-paged, by the traffic index below;
-- the run index serves the most common filter. An entry ends with the
-- row's rowid.
CREATE INDEX audit_events_by_run ON audit_events (organization_id, run_id, created_at);
-- The traffic overview's reads (0044), and ListAudit's: organization and
-- time first, then every column the overview reads, so its reads walk one
-- range of the index and never the rows. Every event has an entry, the
-- kind in it: the overview counts calls (kind = ''), and the list reads
-- events of every kind. It is the time index too, which an event paid
-- for beside it.
CREATE INDEX audit_events_traffic ON audit_events
	(organization_id, created_at, kind, source, tool, agent_id, outcome, latency_micros, cost_cents);
-- As they were (0029, 0030, 0046).
CREATE UNIQUE INDEX audit_events_chain ON audit_events (organization_id, seq) WHERE seq > 0;
CREATE INDEX audit_events_unapproved_destructive ON audit_events (organization_id, created_at, id)
	WHERE destructive AND approval_id = '';
CREATE INDEX audit_events_classified ON audit_events (organization_id, created_at, id)
	WHERE classifications <> '';
CREATE INDEX audit_events_by_approver ON audit_events (organization_id, approver_id, created_at, id)
	WHERE approver_id <> '';
CREATE INDEX audit_events_by_approval ON audit_events (organization_id, approval_id, created_at, id)
	WHERE approval_id <> '';

-- The triggers, as they were (0029, 0030, 0035).
CREATE TRIGGER audit_events_chained BEFORE INSERT ON audit_events
	WHEN NEW.seq <= 0 OR NEW.hash IS NULL OR NEW.prev_hash IS NULL
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is chained: an event without its sequence number and hashes is refused');
END;
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is append-only: UPDATE refused');
END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
	WHEN NOT EXISTS (SELECT 1 FROM audit_retention r
		WHERE r.organization_id = OLD.organization_id AND OLD.seq <= r.through)
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is append-only: DELETE refused');
END;
CREATE TRIGGER audit_events_outbox AFTER INSERT ON audit_events
BEGIN
	INSERT INTO audit_outbox (sink, organization_id, event_id, created_at)
		SELECT name, NEW.organization_id, NEW.id, NEW.created_at FROM audit_sinks;
END;
CREATE TRIGGER audit_retention_at_checkpoint BEFORE INSERT ON audit_retention
	WHEN NOT EXISTS (SELECT 1 FROM audit_checkpoints c JOIN audit_events e
		ON e.organization_id = c.organization_id AND e.seq = c.seq AND e.hash = c.hash
		WHERE c.organization_id = NEW.organization_id AND c.seq = NEW.through)
BEGIN
	SELECT RAISE(ABORT, 'audit retention opens only at a checkpoint that is the chain''s');
END;
CREATE TRIGGER audit_retention_whole BEFORE DELETE ON audit_retention
	WHEN EXISTS (SELECT 1 FROM audit_events e
		WHERE e.organization_id = OLD.organization_id AND e.seq > 0 AND e.seq <= OLD.through)
BEGIN
	SELECT RAISE(ABORT, 'audit retention drops a whole prefix of a chain');
END;
