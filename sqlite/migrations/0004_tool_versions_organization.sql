-- Published tool versions belong to an organization: only the organization
-- that published a version reviews, changes, lists and calls it, and two
-- organizations hold one tool name independently. (Built-in and ingested
-- tools are the operator's, configured at serve time, and are not stored.)
--
-- SQLite cannot change a table's key in place: the table is rebuilt, its
-- rows copied with their insertion order (seq) and lifecycle as they are,
-- every existing version moved to the "default" organization, the one a
-- deployment served before organizations had catalogues of their own.
-- Dropping the old table drops its triggers; they are made again below,
-- after the copy, so the copy itself moves no revision.
CREATE TABLE tool_versions_by_organization (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	organization_id TEXT NOT NULL,
	name            TEXT NOT NULL,
	version         TEXT NOT NULL,
	state           TEXT NOT NULL,
	definition      BLOB,
	schema_hash     TEXT NOT NULL,
	owner           TEXT NOT NULL,
	review_reasons  TEXT NOT NULL CHECK (json_valid(review_reasons) AND json_type(review_reasons) = 'array'),
	published_by    TEXT NOT NULL,
	published_at    INTEGER NOT NULL,
	reviewed_by     TEXT NOT NULL,
	reviewed_at     INTEGER,
	review_note     TEXT NOT NULL,
	sunset_at       INTEGER,
	replacement     TEXT NOT NULL,
	retire_blocked  TEXT NOT NULL,
	revision        INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	UNIQUE (organization_id, name, version)
) STRICT;

INSERT INTO tool_versions_by_organization (seq, organization_id, name, version, state, definition, schema_hash, owner,
	review_reasons, published_by, published_at, reviewed_by, reviewed_at, review_note, sunset_at, replacement,
	retire_blocked, revision, updated_at)
SELECT seq, 'default', name, version, state, definition, schema_hash, owner,
	review_reasons, published_by, published_at, reviewed_by, reviewed_at, review_note, sunset_at, replacement,
	retire_blocked, revision, updated_at
FROM tool_versions;

DROP TABLE tool_versions;
ALTER TABLE tool_versions_by_organization RENAME TO tool_versions;

-- ListToolVersions: an organization's, by name, then publication,
-- keyset-paged; the owner index serves a team's listing in the same order.
-- ListEveryToolVersion reads the first in its whole order.
CREATE INDEX tool_versions_by_name ON tool_versions (organization_id, name, published_at, seq);
CREATE INDEX tool_versions_by_owner ON tool_versions (organization_id, owner, name, published_at, seq);

CREATE TRIGGER tool_versions_insert_revision AFTER INSERT ON tool_versions BEGIN
	UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_versions_update_revision AFTER UPDATE ON tool_versions BEGIN
	UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
END;

-- Every node reloads what it serves: the versions moved.
UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
