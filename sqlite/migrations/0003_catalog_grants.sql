-- The registry's tables: the catalogue of published tool versions
-- (toolplane.CatalogStore) and each organization's grants, denies, bundles
-- and change log (toolplane.GrantStore). Conventions as in 0001: times are
-- INTEGER unix microseconds UTC (NULL where the zero time means "none"),
-- byte fields BLOB (NULL when empty), string lists JSON arrays.

-- The catalogue is the deployment's, not an organization's: a tool is
-- published once and every organization grants it, so tool_versions alone
-- has no organization_id.
--
-- seq is the insertion order, which breaks ties of published_at in a
-- listing. AUTOINCREMENT keeps it rising even if the newest row were ever
-- deleted, so an order once listed never changes. (name, version) is the
-- identity: its UNIQUE constraint is what makes the second publish of one
-- version fail, whichever connection or process sent it.
CREATE TABLE tool_versions (
	seq            INTEGER PRIMARY KEY AUTOINCREMENT,
	name           TEXT NOT NULL,
	version        TEXT NOT NULL,
	state          TEXT NOT NULL,
	definition     BLOB,
	schema_hash    TEXT NOT NULL,
	owner          TEXT NOT NULL,
	review_reasons TEXT NOT NULL CHECK (json_valid(review_reasons) AND json_type(review_reasons) = 'array'),
	published_by   TEXT NOT NULL,
	published_at   INTEGER NOT NULL,
	reviewed_by    TEXT NOT NULL,
	reviewed_at    INTEGER,
	review_note    TEXT NOT NULL,
	sunset_at      INTEGER,
	replacement    TEXT NOT NULL,
	retire_blocked TEXT NOT NULL,
	revision       INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	UNIQUE (name, version)
) STRICT;

-- ListToolVersions: by name, then publication, keyset-paged; the owner
-- index serves a team's listing in the same order.
CREATE INDEX tool_versions_by_name ON tool_versions (name, published_at, seq);
CREATE INDEX tool_versions_by_owner ON tool_versions (owner, name, published_at, seq);

-- The revisions every node polls to learn that its cached catalogue or
-- authorization is stale. Triggers bump them, so the bump is part of the
-- statement that made the change: a reader that sees a revision sees every
-- row written under it, and no write path (the store's or an operator's
-- SQL) can change a row without moving its revision. A write that changes
-- no row (a stale compare-and-set, a revocation of a revoked grant) fires
-- no row trigger and moves nothing.
CREATE TABLE catalog_revision (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	revision INTEGER NOT NULL
) STRICT;
INSERT INTO catalog_revision (id, revision) VALUES (1, 0);

CREATE TRIGGER tool_versions_insert_revision AFTER INSERT ON tool_versions BEGIN
	UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_versions_update_revision AFTER UPDATE ON tool_versions BEGIN
	UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

-- One row per organization that ever changed its authorization; an
-- organization without one is at revision 0.
CREATE TABLE authz_revisions (
	organization_id TEXT NOT NULL PRIMARY KEY,
	revision        INTEGER NOT NULL
) STRICT;

-- Grants: exactly one of pattern and bundle is set, the other ''. A grant is
-- never deleted; revoked_at marks it revoked, so the audit trail can always
-- say what authorized a call.
CREATE TABLE grants (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	pattern         TEXT NOT NULL,
	bundle          TEXT NOT NULL,
	tenant_scope    TEXT NOT NULL CHECK (json_valid(tenant_scope) AND json_type(tenant_scope) = 'array'),
	expires_at      INTEGER,
	granted_by      TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	revoked_at      INTEGER,
	revoked_by      TEXT NOT NULL,
	PRIMARY KEY (organization_id, id),
	CHECK ((pattern = '') <> (bundle = ''))
) STRICT;

-- ListGrants: oldest first, of the organization or of one agent.
CREATE INDEX grants_by_time ON grants (organization_id, created_at, id);
CREATE INDEX grants_by_agent ON grants (organization_id, agent_id, created_at, id);

CREATE TRIGGER grants_insert_authz AFTER INSERT ON grants BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (NEW.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER grants_update_authz AFTER UPDATE ON grants BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (NEW.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;

CREATE TABLE denies (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	agent_id        TEXT NOT NULL,
	pattern         TEXT NOT NULL,
	reason          TEXT NOT NULL,
	created_by      TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- ListDenies: oldest first.
CREATE INDEX denies_by_time ON denies (organization_id, created_at, id);

CREATE TRIGGER denies_insert_authz AFTER INSERT ON denies BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (NEW.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER denies_update_authz AFTER UPDATE ON denies BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (NEW.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER denies_delete_authz AFTER DELETE ON denies BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (OLD.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;

-- Bundles: the primary key is also ListBundles' order.
CREATE TABLE bundles (
	organization_id TEXT NOT NULL,
	name            TEXT NOT NULL,
	refs            TEXT NOT NULL CHECK (json_valid(refs) AND json_type(refs) = 'array'),
	created_by      TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, name)
) STRICT;

CREATE TRIGGER bundles_insert_authz AFTER INSERT ON bundles BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (NEW.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER bundles_update_authz AFTER UPDATE ON bundles BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (NEW.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER bundles_delete_authz AFTER DELETE ON bundles BEGIN
	INSERT INTO authz_revisions (organization_id, revision) VALUES (OLD.organization_id, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = revision + 1;
END;

-- The change log: append-only, like audit_events.
CREATE TABLE changes (
	organization_id TEXT NOT NULL,
	id              TEXT NOT NULL,
	kind            TEXT NOT NULL,
	subject         TEXT NOT NULL,
	actor           TEXT NOT NULL,
	detail          BLOB,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (organization_id, id)
) STRICT;

-- ListChanges: newest first, keyset-paged, unfiltered or by kind or by
-- subject (the history of one tool version, agent or bundle).
CREATE INDEX changes_by_time ON changes (organization_id, created_at, id);
CREATE INDEX changes_by_kind ON changes (organization_id, kind, created_at, id);
CREATE INDEX changes_by_subject ON changes (organization_id, subject, created_at, id);
