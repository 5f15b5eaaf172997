-- The five tables of toolplane.Store, created in the schema the
-- connection's search_path selects.
--
-- Times are BIGINT unix microseconds UTC (NULL where the domain's zero time
-- means "none"), as in the SQLite store: a list cursor carries created_at as
-- that same integer, so it names the same position on either backend, and no
-- driver or session setting (TimeZone, rounding of text timestamps) stands
-- between the value written and the value read. Byte fields are BYTEA (NULL
-- when empty).
--
-- Every text column is COLLATE "C": equality and order are bytewise whatever
-- the database's collation, which is the order list ties are broken in, and
-- what keeps a keyset cursor stable. A claim or approval key is BYTEA, not
-- TEXT: canonical.Key lets its parts hold any byte, and TEXT refuses NUL and
-- invalid UTF-8. The request and arguments hashes are BYTEA for the same
-- reason: each is an opaque token the store keeps byte for byte and only
-- ever compares for equality, whatever the caller put in it. BYTEA compares
-- bytewise too.
--
-- Every primary key and index leads with organization_id, because every
-- query filters by it; the credentials' primary key and the background
-- sweeps' indexes, at the end, are the exceptions, as their queries are.

-- The idempotency journal: one row per claimed (organization, tool, key).
CREATE TABLE claims (
	organization_id TEXT COLLATE "C" NOT NULL,
	tool            TEXT COLLATE "C" NOT NULL,
	key             BYTEA NOT NULL,
	request_hash    BYTEA NOT NULL,
	status          TEXT COLLATE "C" NOT NULL,
	result          BYTEA,
	owner           TEXT COLLATE "C" NOT NULL,
	lease_until     BIGINT,
	dispatched      BOOLEAN NOT NULL,
	attempts        BIGINT NOT NULL,
	run_id          TEXT COLLATE "C" NOT NULL,
	step_path       TEXT COLLATE "C" NOT NULL,
	arguments       BYTEA,
	invocation      BYTEA,
	reason          TEXT COLLATE "C" NOT NULL,
	reconciled_by   TEXT COLLATE "C" NOT NULL,
	note            TEXT COLLATE "C" NOT NULL,
	version         BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, tool, key)
);

-- ListClaims: one state, oldest first, keyset-paged.
CREATE INDEX claims_by_status ON claims (organization_id, status, created_at, tool, key);

CREATE TABLE approvals (
	organization_id    TEXT COLLATE "C" NOT NULL,
	id                 TEXT COLLATE "C" NOT NULL,
	run_id             TEXT COLLATE "C" NOT NULL,
	step_path          TEXT COLLATE "C" NOT NULL,
	tool               TEXT COLLATE "C" NOT NULL,
	tool_version       TEXT COLLATE "C" NOT NULL,
	key                BYTEA NOT NULL,
	arguments_hash     BYTEA NOT NULL,
	arguments          BYTEA,
	invocation         BYTEA,
	principal_id       TEXT COLLATE "C" NOT NULL,
	preview            TEXT COLLATE "C" NOT NULL,
	status             TEXT COLLATE "C" NOT NULL,
	default_on_timeout TEXT COLLATE "C" NOT NULL,
	expires_at         BIGINT,
	created_at         BIGINT NOT NULL,
	resolved_at        BIGINT,
	resolved_by        TEXT COLLATE "C" NOT NULL,
	reason             TEXT COLLATE "C" NOT NULL,
	version            BIGINT NOT NULL,
	level              BIGINT NOT NULL,
	approver_group     TEXT COLLATE "C" NOT NULL,
	escalated_from     TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- FindApprovals: the approvals filed for one run and key, in order.
CREATE INDEX approvals_by_run_key ON approvals (organization_id, run_id, key, created_at, id);
-- ListApprovals: one state, oldest first, keyset-paged.
CREATE INDEX approvals_by_status ON approvals (organization_id, status, created_at, id);

CREATE TABLE usage (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	run_id          TEXT COLLATE "C" NOT NULL,
	root_run_id     TEXT COLLATE "C" NOT NULL,
	tool            TEXT COLLATE "C" NOT NULL,
	cost_cents      BIGINT NOT NULL,
	units           BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- RunTreeCost sums a run tree from this index alone (cost_cents is in it).
CREATE INDEX usage_by_root_run ON usage (organization_id, root_run_id) INCLUDE (cost_cents);

CREATE TABLE audit_events (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	run_id          TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	principal_id    TEXT COLLATE "C" NOT NULL,
	user_id         TEXT COLLATE "C" NOT NULL,
	tool            TEXT COLLATE "C" NOT NULL,
	tool_version    TEXT COLLATE "C" NOT NULL,
	source          TEXT COLLATE "C" NOT NULL,
	outcome         TEXT COLLATE "C" NOT NULL,
	arguments_hash  BYTEA NOT NULL,
	approval_id     TEXT COLLATE "C" NOT NULL,
	authorized_by   TEXT COLLATE "C" NOT NULL,
	replayed        BOOLEAN NOT NULL,
	latency_micros  BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- ListAudit: newest first, keyset-paged (an index is read backwards as
-- cheaply as forwards); the run index serves the most common filter.
CREATE INDEX audit_events_by_time ON audit_events (organization_id, created_at, id);
CREATE INDEX audit_events_by_run ON audit_events (organization_id, run_id, created_at, id);

-- API keys' stored forms: never a key, only the hash of its secret. The
-- primary key is the id alone: authentication looks a key up by its public
-- id before it knows the organization (the row is what says it), so an id
-- names one credential across all organizations. organization_id is kept,
-- indexed, and in the WHERE clause of every other query.
--
-- roles and tools are TEXT[], not JSON: a list of names is what an array
-- is, pgx reads and writes it as a []string with no encoding step between,
-- and "which credentials grant this tool" stays a plain = ANY (tools) or
-- @> query that a GIN index can serve should it be needed. The store
-- never writes a NULL element, and an empty list is '{}', never NULL.
CREATE TABLE credentials (
	id              TEXT COLLATE "C" PRIMARY KEY,
	organization_id TEXT COLLATE "C" NOT NULL,
	kind            TEXT COLLATE "C" NOT NULL,
	subject         TEXT COLLATE "C" NOT NULL,
	roles           TEXT[] COLLATE "C" NOT NULL,
	tools           TEXT[] COLLATE "C" NOT NULL,
	hash            BYTEA,
	label           TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	expires_at      BIGINT,
	revoked_at      BIGINT,
	last_used_at    BIGINT,
	created_by      TEXT COLLATE "C" NOT NULL,
	version         BIGINT NOT NULL
);

-- ListCredentials: one organization's, oldest first, keyset-paged.
-- last_used_at is in no index, so TouchCredential, which runs on every
-- authenticated request, stays a heap-only (HOT) update.
CREATE INDEX credentials_by_organization ON credentials (organization_id, created_at, id);

-- The background sweeps cross organizations: claims whose lease ended,
-- completed claims past retention, approvals resolved approved.
CREATE INDEX claims_by_lease ON claims (status, lease_until);
CREATE INDEX claims_by_update ON claims (status, updated_at);
CREATE INDEX approvals_by_resolution ON approvals (status, resolved_at);
