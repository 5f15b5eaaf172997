-- Every change to an operator's stored upstream tool setting is announced,
-- in the transaction that makes it, on the channel
-- toolplane_upstream_settings, as 0043 announces published tool versions:
-- the payload is the table's schema, an empty organization (the settings
-- are the deployment's) and the upstream's slug, separated by spaces.
-- Nodes read the settings again when told (postgres.Store.WatchChanges,
-- toolplane.TopicUpstreamSettings) rather than polling the table every
-- 2 s: a change on one node takes effect on every other within the
-- feed's latency, and an idle node reads nothing.
CREATE FUNCTION toolplane_upstream_settings_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	r RECORD;
BEGIN
	IF TG_OP = 'DELETE' THEN
		r := OLD;
	ELSE
		r := NEW;
	END IF;
	PERFORM pg_notify('toolplane_upstream_settings', TG_TABLE_SCHEMA || '  ' || r.upstream);
	IF TG_OP = 'UPDATE' AND OLD.upstream IS DISTINCT FROM NEW.upstream THEN
		PERFORM pg_notify('toolplane_upstream_settings', TG_TABLE_SCHEMA || '  ' || OLD.upstream);
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER upstream_tool_settings_changed AFTER INSERT OR UPDATE OR DELETE ON upstream_tool_settings
	FOR EACH ROW EXECUTE FUNCTION toolplane_upstream_settings_changed();
