-- The audit trail's hash chain (package auditchain). Each organization's
-- events are numbered from 1 with no gap, and each carries the hash of the
-- one before and its own; events stored before this migration keep seq 0
-- and stand outside the chain, which starts with the next event.
ALTER TABLE audit_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit_events ADD COLUMN prev_hash BYTEA;
ALTER TABLE audit_events ADD COLUMN hash BYTEA;
CREATE UNIQUE INDEX audit_events_chain ON audit_events (organization_id, seq) WHERE seq > 0;
-- Every new event is chained: an insert that bypasses the store's chained
-- statements is refused (NOT VALID: the events before are not checked).
ALTER TABLE audit_events ADD CONSTRAINT audit_events_chained
	CHECK (seq > 0 AND hash IS NOT NULL AND prev_hash IS NOT NULL) NOT VALID;

-- Where each organization's chain stands. An insert of an event advances
-- its organization's row (INSERT ... ON CONFLICT DO UPDATE), which locks
-- that row alone until the transaction ends: organizations' writes do not
-- wait for each other's.
CREATE TABLE audit_heads (
	organization_id TEXT COLLATE "C" PRIMARY KEY,
	seq             BIGINT NOT NULL,
	prev_hash       BYTEA NOT NULL,
	hash            BYTEA NOT NULL
);

-- Signed checkpoints: the operator's Ed25519 signature of a chain's hash
-- at a sequence number.
CREATE TABLE audit_checkpoints (
	organization_id TEXT COLLATE "C" NOT NULL,
	seq             BIGINT NOT NULL,
	hash            BYTEA NOT NULL,
	created_at      BIGINT NOT NULL,
	key_id          TEXT COLLATE "C" NOT NULL,
	signature       BYTEA NOT NULL,
	PRIMARY KEY (organization_id, seq)
);

-- The trail refuses UPDATE and DELETE, whoever asks. The one exception is
-- retention (Store.DropAudit): inside its transaction it names the
-- organization in the setting toolplane.audit_retention, and may then
-- delete that organization's events that a checkpoint covers (seq at or
-- below a checkpoint's; events from before the chain too). Checkpoints
-- are never changed or deleted.
CREATE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'audit_events'
		AND current_setting('toolplane.audit_retention', true) = OLD.organization_id
		AND (OLD.seq = 0 OR EXISTS (SELECT 1 FROM audit_checkpoints c
			WHERE c.organization_id = OLD.organization_id AND c.seq >= OLD.seq)) THEN
		RETURN OLD;
	END IF;
	RAISE EXCEPTION 'the audit trail is append-only: % on % refused', TG_OP, TG_TABLE_NAME
		USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
	FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE ON audit_checkpoints
	FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();

-- And no role but the tables' owner holds the rights to try; a deployment
-- runs toolplane as a role granted INSERT and SELECT only on these two
-- tables (docs/audit.md).
REVOKE UPDATE, DELETE, TRUNCATE ON audit_events, audit_checkpoints FROM PUBLIC;
