-- The registry's tables: the catalogue of published tool versions
-- (toolplane.CatalogStore) and each organization's grants, denies, bundles
-- and change log (toolplane.GrantStore). Conventions as in 0001: times are
-- BIGINT unix microseconds UTC (NULL where the zero time means "none"),
-- text is COLLATE "C", byte fields BYTEA (NULL when empty), string lists
-- TEXT[] (never NULL, '{}' when empty).

-- The catalogue is the deployment's, not an organization's: a tool is
-- published once and every organization grants it, so tool_versions alone
-- has no organization_id.
--
-- (name, version) is the identity: the primary key is what makes the second
-- of two concurrent publishes of one version fail, on whichever node. seq
-- is the insertion order, which breaks ties of published_at in a listing.
-- The definition is BYTEA, not JSONB: JSONB would reorder its keys and drop
-- its whitespace, and a published definition is kept byte for byte (its
-- schema hash is computed over what was published).
CREATE TABLE tool_versions (
	name           TEXT COLLATE "C" NOT NULL,
	version        TEXT COLLATE "C" NOT NULL,
	seq            BIGINT GENERATED ALWAYS AS IDENTITY,
	state          TEXT COLLATE "C" NOT NULL,
	definition     BYTEA,
	schema_hash    TEXT COLLATE "C" NOT NULL,
	owner          TEXT COLLATE "C" NOT NULL,
	review_reasons TEXT[] COLLATE "C" NOT NULL,
	published_by   TEXT COLLATE "C" NOT NULL,
	published_at   BIGINT NOT NULL,
	reviewed_by    TEXT COLLATE "C" NOT NULL,
	reviewed_at    BIGINT,
	review_note    TEXT COLLATE "C" NOT NULL,
	sunset_at      BIGINT,
	replacement    TEXT COLLATE "C" NOT NULL,
	retire_blocked TEXT COLLATE "C" NOT NULL,
	revision       BIGINT NOT NULL,
	updated_at     BIGINT NOT NULL,
	PRIMARY KEY (name, version)
);

-- ListToolVersions: by name, then publication, keyset-paged; the owner
-- index serves a team's listing in the same order.
CREATE INDEX tool_versions_by_name ON tool_versions (name, published_at, seq);
CREATE INDEX tool_versions_by_owner ON tool_versions (owner, name, published_at, seq);

-- The revisions every node polls to learn that its cached catalogue or
-- authorization is stale. Row triggers bump them inside the statement that
-- made the change, so the bump commits with it or not at all, and the row
-- lock the bump takes orders concurrent writers: a reader that sees a
-- revision sees every change under it, which a sequence (handed out before
-- commit, committed in any order) would not promise. A write that changes
-- no row (a stale compare-and-set, a revocation of a revoked grant) fires
-- no row trigger and moves nothing. Catalogue writes are rare, so their
-- taking turns at the one counter row costs nothing that matters.
--
-- The functions keep the search_path they were created under: a trigger
-- runs with the search_path of whichever session wrote, and the counters
-- live beside the tables.
CREATE TABLE catalog_revision (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	revision BIGINT NOT NULL
);
INSERT INTO catalog_revision (id, revision) VALUES (1, 0);

CREATE FUNCTION bump_catalog_revision() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
	RETURN NULL;
END
$$;

CREATE TRIGGER tool_versions_revision AFTER INSERT OR UPDATE ON tool_versions
	FOR EACH ROW EXECUTE FUNCTION bump_catalog_revision();

-- One row per organization that ever changed its authorization; an
-- organization without one is at revision 0.
CREATE TABLE authz_revisions (
	organization_id TEXT COLLATE "C" PRIMARY KEY,
	revision        BIGINT NOT NULL
);

CREATE FUNCTION bump_authz_revision() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
	org TEXT;
BEGIN
	IF TG_OP = 'DELETE' THEN
		org := OLD.organization_id;
	ELSE
		org := NEW.organization_id;
	END IF;
	INSERT INTO authz_revisions AS r (organization_id, revision) VALUES (org, 1)
		ON CONFLICT (organization_id) DO UPDATE SET revision = r.revision + 1;
	RETURN NULL;
END
$$;

-- Grants: exactly one of pattern and bundle is set, the other ''. A grant is
-- never deleted; revoked_at marks it revoked, so the audit trail can always
-- say what authorized a call.
CREATE TABLE grants (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	pattern         TEXT COLLATE "C" NOT NULL,
	bundle          TEXT COLLATE "C" NOT NULL,
	tenant_scope    TEXT[] COLLATE "C" NOT NULL,
	expires_at      BIGINT,
	granted_by      TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	revoked_at      BIGINT,
	revoked_by      TEXT COLLATE "C" NOT NULL,
	PRIMARY KEY (organization_id, id),
	CHECK ((pattern = '') <> (bundle = ''))
);

-- ListGrants: oldest first, of the organization or of one agent.
CREATE INDEX grants_by_time ON grants (organization_id, created_at, id);
CREATE INDEX grants_by_agent ON grants (organization_id, agent_id, created_at, id);

CREATE TRIGGER grants_authz_revision AFTER INSERT OR UPDATE OR DELETE ON grants
	FOR EACH ROW EXECUTE FUNCTION bump_authz_revision();

CREATE TABLE denies (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	agent_id        TEXT COLLATE "C" NOT NULL,
	pattern         TEXT COLLATE "C" NOT NULL,
	reason          TEXT COLLATE "C" NOT NULL,
	created_by      TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- ListDenies: oldest first.
CREATE INDEX denies_by_time ON denies (organization_id, created_at, id);

CREATE TRIGGER denies_authz_revision AFTER INSERT OR UPDATE OR DELETE ON denies
	FOR EACH ROW EXECUTE FUNCTION bump_authz_revision();

-- Bundles: the primary key is also ListBundles' order.
CREATE TABLE bundles (
	organization_id TEXT COLLATE "C" NOT NULL,
	name            TEXT COLLATE "C" NOT NULL,
	refs            TEXT[] COLLATE "C" NOT NULL,
	created_by      TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, name)
);

CREATE TRIGGER bundles_authz_revision AFTER INSERT OR UPDATE OR DELETE ON bundles
	FOR EACH ROW EXECUTE FUNCTION bump_authz_revision();

-- The change log: append-only, like audit_events.
CREATE TABLE changes (
	organization_id TEXT COLLATE "C" NOT NULL,
	id              TEXT COLLATE "C" NOT NULL,
	kind            TEXT COLLATE "C" NOT NULL,
	subject         TEXT COLLATE "C" NOT NULL,
	actor           TEXT COLLATE "C" NOT NULL,
	detail          BYTEA,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, id)
);

-- ListChanges: newest first, keyset-paged, unfiltered or by kind or by
-- subject (the history of one tool version, agent or bundle).
CREATE INDEX changes_by_time ON changes (organization_id, created_at, id);
CREATE INDEX changes_by_kind ON changes (organization_id, kind, created_at, id);
CREATE INDEX changes_by_subject ON changes (organization_id, subject, created_at, id);
