-- Published tool versions belong to an organization: only the organization
-- that published a version reviews, changes, lists and calls it, and two
-- organizations hold one tool name independently. (Built-in and ingested
-- tools are the operator's, configured at serve time, and are not stored.)
--
-- Every existing version moves to the "default" organization, the one a
-- deployment served before organizations had catalogues of their own; the
-- column then keeps no default, so every insert names its organization.
-- Adding a column with a constant default rewrites no row and fires no row
-- trigger: the revision is moved once, below, so every node reloads.
ALTER TABLE tool_versions ADD COLUMN organization_id TEXT COLLATE "C" NOT NULL DEFAULT 'default';
ALTER TABLE tool_versions ALTER COLUMN organization_id DROP DEFAULT;

ALTER TABLE tool_versions DROP CONSTRAINT tool_versions_pkey;
ALTER TABLE tool_versions ADD PRIMARY KEY (organization_id, name, version);

-- ListToolVersions: an organization's, by name, then publication,
-- keyset-paged; the owner index serves a team's listing in the same order.
-- ListEveryToolVersion reads the first in its whole order.
DROP INDEX tool_versions_by_name;
DROP INDEX tool_versions_by_owner;
CREATE INDEX tool_versions_by_name ON tool_versions (organization_id, name, published_at, seq);
CREATE INDEX tool_versions_by_owner ON tool_versions (organization_id, owner, name, published_at, seq);

UPDATE catalog_revision SET revision = revision + 1 WHERE id = 1;
