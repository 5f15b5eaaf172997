-- Every change to a published tool version is announced, in the
-- transaction that makes it, on the channel toolplane_catalog, as 0011
-- announces connections and 0036 OAuth consents: the payload is the
-- table's schema, the organization and the tool's name, separated by
-- spaces. Nodes reload their registry (and with it their search index)
-- when told (postgres.Store.WatchChanges, toolplane.TopicCatalog) rather
-- than at the next poll of catalog_revision, which stays as the fallback:
-- a publish on one node is served, and found, on every other within the
-- feed's latency.
--
-- Unlike OAuth's, new rows are announced: a publish is what the other
-- nodes must learn of first.
CREATE FUNCTION toolplane_catalog_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	r RECORD;
BEGIN
	IF TG_OP = 'DELETE' THEN
		r := OLD;
	ELSE
		r := NEW;
	END IF;
	PERFORM pg_notify('toolplane_catalog', TG_TABLE_SCHEMA || ' ' || r.organization_id || ' ' || r.name);
	IF TG_OP = 'UPDATE' AND OLD.organization_id IS DISTINCT FROM NEW.organization_id THEN
		PERFORM pg_notify('toolplane_catalog', TG_TABLE_SCHEMA || ' ' || OLD.organization_id || ' ' || OLD.name);
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER tool_versions_changed AFTER INSERT OR UPDATE OR DELETE ON tool_versions
	FOR EACH ROW EXECUTE FUNCTION toolplane_catalog_changed();
