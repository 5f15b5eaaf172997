-- Recovery that tells the truth, and an audit event for every state a call
-- reaches.
--
-- An audit event names the idempotency key it is about and why the state
-- was reached: a sweep or a takeover has no caller to tell, so the event is
-- the only record of what happened to the key.
ALTER TABLE audit_events ADD COLUMN key TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN reason TEXT NOT NULL DEFAULT '';

-- A claim names the node instance that holds it, so a claim of a node that
-- stopped heartbeating is decided as soon as the node is known dead, not
-- after its whole lease. '' (claims from before this migration) is judged
-- by its lease alone.
ALTER TABLE claims ADD COLUMN node TEXT NOT NULL DEFAULT '';

-- The nodes of a deployment: one row per running instance of serve. name
-- is the node's stable name (a restarted node keeps it, and releases the
-- undispatched claims of its earlier instances at start); id names one
-- instance. heartbeat_at is the last time the instance said it was alive.
CREATE TABLE nodes (
	id           TEXT NOT NULL PRIMARY KEY,
	name         TEXT NOT NULL,
	started_at   INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL
) STRICT;
CREATE INDEX nodes_by_heartbeat ON nodes (heartbeat_at);
CREATE INDEX nodes_by_name ON nodes (name);

-- The claims a node holds, for the sweep of a dead node's claims and a
-- restarted node's release of its own; only processing claims are held.
CREATE INDEX claims_by_node ON claims (node) WHERE status = 'processing';
