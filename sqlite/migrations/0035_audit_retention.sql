-- Retention of the audit trail (auditchain.Retain): a range is dropped
-- only as a whole prefix of one organization's chain, up to a checkpoint
-- stored at its end whose hash is the chain's there.

-- Retention's door now names the range's end. A row of it may be opened
-- only at a checkpoint that is the chain's; it must be closed before the
-- transaction commits (the deferred foreign key to a table that is always
-- empty fails the commit while the row exists); and closing it checks no
-- chained row of the range remains, so a row in the middle of a chain is
-- never deleted alone.
DROP TRIGGER audit_events_no_delete;
DROP TABLE audit_retention;
CREATE TABLE audit_retention_never (
	door INTEGER NOT NULL PRIMARY KEY
) STRICT;
CREATE TABLE audit_retention (
	organization_id TEXT NOT NULL PRIMARY KEY,
	through         INTEGER NOT NULL,
	door            INTEGER NOT NULL DEFAULT 1
		REFERENCES audit_retention_never (door) DEFERRABLE INITIALLY DEFERRED
) STRICT;
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
CREATE TRIGGER audit_retention_no_update BEFORE UPDATE ON audit_retention
BEGIN
	SELECT RAISE(ABORT, 'audit retention''s door is not moved: UPDATE refused');
END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
	WHEN NOT EXISTS (SELECT 1 FROM audit_retention r
		WHERE r.organization_id = OLD.organization_id AND OLD.seq <= r.through)
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is append-only: DELETE refused');
END;

-- The organizations with a chain are only ever added.
CREATE TRIGGER audit_organizations_no_update BEFORE UPDATE ON audit_organizations
BEGIN
	SELECT RAISE(ABORT, 'audit organizations are append-only: UPDATE refused');
END;
CREATE TRIGGER audit_organizations_no_delete BEFORE DELETE ON audit_organizations
BEGIN
	SELECT RAISE(ABORT, 'audit organizations are append-only: DELETE refused');
END;

-- A manual purge: one platform admin proposes dropping the
-- organization's events before before_at, another confirms before
-- expires_at; the proposer never confirms their own.
CREATE TABLE audit_purges (
	id              TEXT NOT NULL PRIMARY KEY,
	organization_id TEXT NOT NULL,
	before_at       INTEGER NOT NULL,
	proposed_by     TEXT NOT NULL,
	proposed_at     INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	confirmed_by    TEXT NOT NULL DEFAULT '',
	confirmed_at    INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX audit_purges_by_organization ON audit_purges (organization_id, proposed_at);
