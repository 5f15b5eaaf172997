-- Seed 003's audit event: what a call's event carries beyond its outcome
-- (tenant, step, key, effect, trace, approver, redacted arguments, the
-- classified fields it touched, output hash, cost, attempts), and the
-- kind that tells a call from a control-plane change (an approval
-- decided, a key revoked, a policy published). Events stored before read
-- as calls with these fields empty.
ALTER TABLE audit_events ADD COLUMN kind TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN subject TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN tenant_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN step_path TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN key_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN effect TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN destructive BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE audit_events ADD COLUMN trace_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN span_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN approver_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN arguments BYTEA;
-- Classified argument paths and their classes, each a JSON array of
-- strings ('' when none), so a classification filter is one LIKE on a
-- quoted value.
ALTER TABLE audit_events ADD COLUMN pii_fields TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN classifications TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN output_hash TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN cost_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit_events ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
