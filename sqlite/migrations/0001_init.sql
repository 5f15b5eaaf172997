-- The five tables of toolplane.Store. Times are INTEGER unix microseconds
-- UTC (NULL where the domain's zero time means "none"); byte fields are BLOB
-- (NULL when empty). Every primary key and index leads with
-- organization_id, because every query filters by it; the credentials'
-- primary key and the background sweeps' indexes are the exceptions (see
-- each).

-- The idempotency journal: one row per claimed (organization, tool, key).
CREATE TABLE claims (
	organization_id TEXT NOT NULL,
	tool            TEXT NOT NULL,
	key             TEXT NOT NULL,
	request_hash    TEXT NOT NULL,
	status          TEXT NOT NULL,
	result          BLOB,
	owner           TEXT NOT NULL,
	lease_until     INTEGER,
	dispatched      INTEGER NOT NULL CHECK (dispatched IN (0, 1)),
	attempts        INTEGER NOT NULL,
	run_id          TEXT NOT NULL,
	step_path       TEXT NOT NULL,
	arguments       BLOB,
	invocation      BLOB,
	reason          TEXT NOT NULL,
	reconciled_by   TEXT NOT NULL,
	note            TEXT NOT NULL,
	version         INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, tool, key)
) STRICT;

-- ListClaims: one state, oldest first, keyset-paged.
CREATE INDEX claims_by_status ON claims (organization_id, status, created_at, tool, key);

CREATE TABLE approvals (
	organization_id    TEXT NOT NULL,
	id                 TEXT NOT NULL,
	run_id             TEXT NOT NULL,
	step_path          TEXT NOT NULL,
	tool               TEXT NOT NULL,
	tool_version       TEXT NOT NULL,
	key                TEXT NOT NULL,
	arguments_hash     TEXT NOT NULL,
	arguments          BLOB,
	invocation         BLOB,
	principal_id       TEXT NOT NULL,
	preview            TEXT NOT NULL,
	status             TEXT NOT NULL,
	default_on_timeout TEXT NOT NULL,
	expires_at         INTEGER,
	created_at         INTEGER NOT NULL,
	resolved_at        INTEGER,
	resolved_by        TEXT NOT NULL,
	reason             TEXT NOT NULL,
	version            INTEGER NOT NULL,
	level              INTEGER NOT NULL,
	approver_group     TEXT NOT NULL,
	escalated_from     TEXT NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- FindApprovals: the approvals filed for one run and key, in order.
CREATE INDEX approvals_by_run_key ON approvals (organization_id, run_id, key, created_at, id);
-- ListApprovals: one state, oldest first, keyset-paged.
CREATE INDEX approvals_by_status ON approvals (organization_id, status, created_at, id);

CREATE TABLE usage (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	run_id          TEXT NOT NULL,
	root_run_id     TEXT NOT NULL,
	tool            TEXT NOT NULL,
	cost_cents      INTEGER NOT NULL,
	units           INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- RunTreeCost sums a run tree from this index alone (cost_cents is in it).
CREATE INDEX usage_by_root_run ON usage (organization_id, root_run_id, cost_cents);

CREATE TABLE audit_events (
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
	arguments_hash  TEXT NOT NULL,
	approval_id     TEXT NOT NULL,
	authorized_by   TEXT NOT NULL,
	replayed        INTEGER NOT NULL CHECK (replayed IN (0, 1)),
	latency_micros  INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- ListAudit: newest first, keyset-paged; the run index serves the most
-- common filter.
CREATE INDEX audit_events_by_time ON audit_events (organization_id, created_at, id);
CREATE INDEX audit_events_by_run ON audit_events (organization_id, run_id, created_at, id);

-- API keys' stored forms: never a key, only the hash of its secret. The
-- primary key is the id alone: authentication looks a key up by its public
-- id before it knows the organization (the row is what says it), so an id
-- names one credential across all organizations. organization_id is kept,
-- indexed, and in the WHERE clause of every other query.
--
-- roles and tools are JSON arrays of strings: SQLite has no array type, and
-- JSON is the form its built-in json_each can query should a lookup by tool
-- or role be needed. The CHECK keeps anything else out.
CREATE TABLE credentials (
	id              TEXT NOT NULL PRIMARY KEY,
	organization_id TEXT NOT NULL,
	kind            TEXT NOT NULL,
	subject         TEXT NOT NULL,
	roles           TEXT NOT NULL CHECK (json_valid(roles) AND json_type(roles) = 'array'),
	tools           TEXT NOT NULL CHECK (json_valid(tools) AND json_type(tools) = 'array'),
	hash            BLOB,
	label           TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	expires_at      INTEGER,
	revoked_at      INTEGER,
	last_used_at    INTEGER,
	created_by      TEXT NOT NULL,
	version         INTEGER NOT NULL
) STRICT;

-- ListCredentials: one organization's, oldest first, keyset-paged.
CREATE INDEX credentials_by_organization ON credentials (organization_id, created_at, id);

-- The background sweeps cross organizations: claims whose lease ended,
-- completed claims past retention, approvals resolved approved.
CREATE INDEX claims_by_lease ON claims (status, lease_until);
CREATE INDEX claims_by_update ON claims (status, updated_at);
CREATE INDEX approvals_by_resolution ON approvals (status, resolved_at);
