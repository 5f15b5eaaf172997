-- Where an organization's people are told that an approval needs them.
-- config is the channel's settings that are not secret (JSON); secret is
-- the sealed secret material (package secret), never in clear. A channel
-- serves one approver group; approver_group '' is the default.
CREATE TABLE notification_channels (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	name            TEXT NOT NULL,
	approver_group  TEXT NOT NULL,
	kind            TEXT NOT NULL,
	config          TEXT NOT NULL CHECK (json_valid(config)),
	secret          BLOB,
	secondary       TEXT NOT NULL,
	created_by      TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id),
	UNIQUE (organization_id, name)
) WITHOUT ROWID;

-- How each event's notification on each channel ended: delivered, or given
-- up (the dead-letter list, read newest first).
CREATE TABLE notification_deliveries (
	organization_id TEXT NOT NULL,
	event           TEXT NOT NULL,
	subject         TEXT NOT NULL,
	channel_id      TEXT NOT NULL,
	state           TEXT NOT NULL,
	attempts        INTEGER NOT NULL,
	error           TEXT NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, event, subject, channel_id)
) WITHOUT ROWID;
CREATE INDEX notification_deliveries_by_state ON notification_deliveries (organization_id, state, updated_at);

-- One-click links already used: a link's nonce is kept until the link
-- expires, so a second use is refused; the sweep removes the expired.
CREATE TABLE notification_link_nonces (
	organization_id TEXT NOT NULL,
	nonce           TEXT NOT NULL,
	expires_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, nonce)
) WITHOUT ROWID;
CREATE INDEX notification_link_nonces_by_expiry ON notification_link_nonces (expires_at);

-- The notification sweep reads recent approvals and uncertain claims
-- across organizations.
CREATE INDEX approvals_by_creation ON approvals (created_at);
CREATE INDEX approvals_by_resolved ON approvals (resolved_at);
CREATE INDEX claims_uncertain_by_update ON claims (updated_at) WHERE status = 'uncertain';
