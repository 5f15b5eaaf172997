-- The audit trail's hash chain (package auditchain). Each organization's
-- events are numbered from 1 with no gap, and each carries the hash of the
-- one before and its own; events stored before this migration keep seq 0
-- and stand outside the chain, which starts with the next event.
ALTER TABLE audit_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit_events ADD COLUMN prev_hash BLOB;
ALTER TABLE audit_events ADD COLUMN hash BLOB;
CREATE UNIQUE INDEX audit_events_chain ON audit_events (organization_id, seq) WHERE seq > 0;

-- The organizations that have a chain, for the checkpoint job. Where a
-- chain stands is read from its newest event (the unique index below), or
-- after retention dropped every event, from its newest checkpoint: SQLite
-- has one writer, and a head row rewritten by every write would add a
-- page to each commit.
CREATE TABLE audit_organizations (
	organization_id TEXT NOT NULL PRIMARY KEY
) STRICT;

-- Signed checkpoints: the operator's Ed25519 signature of a chain's hash
-- at a sequence number.
CREATE TABLE audit_checkpoints (
	organization_id TEXT NOT NULL,
	seq             INTEGER NOT NULL,
	hash            BLOB NOT NULL,
	created_at      INTEGER NOT NULL,
	key_id          TEXT NOT NULL,
	signature       BLOB NOT NULL,
	PRIMARY KEY (organization_id, seq)
) STRICT;

-- Retention's permission: Store.DropAudit inserts the organization's row
-- here, deletes, and removes the row again, all in one transaction, so no
-- other transaction ever sees it.
CREATE TABLE audit_retention (
	organization_id TEXT NOT NULL PRIMARY KEY
) STRICT;

-- Every new event is chained.
CREATE TRIGGER audit_events_chained BEFORE INSERT ON audit_events
	WHEN NEW.seq <= 0 OR NEW.hash IS NULL OR NEW.prev_hash IS NULL
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is chained: an event without its sequence number and hashes is refused');
END;

-- The trail refuses UPDATE and DELETE; retention alone deletes, the
-- events a checkpoint covers, of the organization it named.
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is append-only: UPDATE refused');
END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
	WHEN NOT EXISTS (SELECT 1 FROM audit_retention r WHERE r.organization_id = OLD.organization_id)
		OR (OLD.seq > 0 AND NOT EXISTS (SELECT 1 FROM audit_checkpoints c
			WHERE c.organization_id = OLD.organization_id AND c.seq >= OLD.seq))
BEGIN
	SELECT RAISE(ABORT, 'the audit trail is append-only: DELETE refused');
END;
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
	SELECT RAISE(ABORT, 'audit checkpoints are append-only: UPDATE refused');
END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN
	SELECT RAISE(ABORT, 'audit checkpoints are append-only: DELETE refused');
END;
