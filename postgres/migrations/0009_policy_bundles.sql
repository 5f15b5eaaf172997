-- Policy bundles: each organization's published rules, one row per
-- version (1, 2, 3...). A version is never rewritten; the primary key is
-- what lets exactly one of two concurrent publishes of a version win.
-- files is a JSON object of file name to content.
CREATE TABLE policy_bundles (
	organization_id TEXT COLLATE "C" NOT NULL,
	version         BIGINT NOT NULL CHECK (version > 0),
	language        TEXT NOT NULL,
	files           JSONB NOT NULL CHECK (jsonb_typeof(files) = 'object'),
	digest          TEXT NOT NULL,
	time_zone       TEXT NOT NULL,
	disabled        BOOLEAN NOT NULL,
	published_by    TEXT NOT NULL,
	published_at    BIGINT NOT NULL,
	note            TEXT NOT NULL,
	PRIMARY KEY (organization_id, version)
);

-- What decided each call: the final effect, the bundle version and rule
-- that decided, whether it was taken degraded from the last known good
-- rules, and the document the rules read (arguments redacted) so a
-- candidate bundle can be replayed against past calls.
ALTER TABLE audit_events ADD COLUMN policy_decision TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN policy_bundle BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit_events ADD COLUMN policy_rule TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN policy_degraded BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE audit_events ADD COLUMN policy_input BYTEA;

-- Who a rule asked to approve a call: the rule, how many distinct people
-- must approve, the one person who must (a manager), and who approved so
-- far.
ALTER TABLE approvals ADD COLUMN rule TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN approvers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN approver TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN approved_by TEXT[] NOT NULL DEFAULT '{}';
