-- Compliance reports read the trail through partial indexes: each holds
-- only the rows its report asks for, so a write of any other event costs
-- no index entry at all.
--
-- destructive-without-approval: destructive events naming no approval.
CREATE INDEX audit_events_unapproved_destructive ON audit_events (organization_id, created_at, id)
	WHERE destructive AND approval_id = '';
-- classification: events whose call touched a classified field.
CREATE INDEX audit_events_classified ON audit_events (organization_id, created_at, id)
	WHERE classifications <> '';
-- approvals-by (and a person's export): events naming who decided.
CREATE INDEX audit_events_by_approver ON audit_events (organization_id, approver_id, created_at, id)
	WHERE approver_id <> '';

-- The sinks the trail is exported to (a JetStream stream, a directory of
-- files): a node configured with one registers it at startup, and from
-- then on every event stored is queued for it.
CREATE TABLE audit_sinks (
	name          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
	registered_at BIGINT NOT NULL
);

-- The transactional outbox: one row per event and registered sink,
-- written by the trigger below in the transaction that stores the event,
-- so an event is queued exactly when it is stored, whatever path stored
-- it. A sink's exporters (one or more nodes) claim rows with a lease,
-- skipping rows another holds, send their events, and delete them once
-- the sink acknowledged. No foreign key: retention may drop an event
-- still queued, and the exporter then drops its row.
CREATE TABLE audit_outbox (
	seq             BIGSERIAL PRIMARY KEY,
	sink            TEXT COLLATE "C" NOT NULL,
	organization_id TEXT COLLATE "C" NOT NULL,
	event_id        TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	lease_until     BIGINT NOT NULL DEFAULT 0,
	owner           TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX audit_outbox_by_sink ON audit_outbox (sink, seq);

CREATE FUNCTION audit_events_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO audit_outbox (sink, organization_id, event_id, created_at)
		SELECT name, NEW.organization_id, NEW.id, NEW.created_at FROM audit_sinks;
	RETURN NULL;
END;
$$;

CREATE TRIGGER audit_events_outbox AFTER INSERT ON audit_events
	FOR EACH ROW EXECUTE FUNCTION audit_events_outbox();
