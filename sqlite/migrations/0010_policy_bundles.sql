-- Policy bundles: each organization's published rules, one row per
-- version (1, 2, 3...). A version is never rewritten; the primary key is
-- what lets exactly one of two concurrent publishes of a version win.
-- files is a JSON object of file name to content.
CREATE TABLE policy_bundles (
	organization_id TEXT NOT NULL,
	version         INTEGER NOT NULL CHECK (version > 0),
	language        TEXT NOT NULL,
	files           TEXT NOT NULL CHECK (json_valid(files) AND json_type(files) = 'object'),
	digest          TEXT NOT NULL,
	time_zone       TEXT NOT NULL,
	disabled        INTEGER NOT NULL CHECK (disabled IN (0, 1)),
	published_by    TEXT NOT NULL,
	published_at    INTEGER NOT NULL,
	note            TEXT NOT NULL,
	PRIMARY KEY (organization_id, version)
) STRICT;

-- What decided each call: the final effect, the bundle version and rule
-- that decided, whether it was taken degraded from the last known good
-- rules, and the document the rules read (arguments redacted) so a
-- candidate bundle can be replayed against past calls.
ALTER TABLE audit_events ADD COLUMN policy_decision TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN policy_bundle INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit_events ADD COLUMN policy_rule TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN policy_degraded INTEGER NOT NULL DEFAULT 0 CHECK (policy_degraded IN (0, 1));
ALTER TABLE audit_events ADD COLUMN policy_input BLOB;

-- Who a rule asked to approve a call: the rule, how many distinct people
-- must approve, the one person who must (a manager), and who approved so
-- far (a JSON array).
ALTER TABLE approvals ADD COLUMN rule TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN approvers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN approver TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN approved_by TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(approved_by) AND json_type(approved_by) = 'array');
