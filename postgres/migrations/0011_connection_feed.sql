-- Every change to a connection is announced, in the transaction that makes
-- it, on the channel toolplane_connections: the payload is the table's
-- schema, the organization and the connection's ID, separated by spaces
-- (none of them holds one). Nodes keep connections in memory and forget
-- one when it is announced (postgres.Store.WatchConnections); a trigger
-- announces whatever wrote the row, the store's statements or an
-- operator's. The schema lets nodes of several deployments, each in a
-- schema of one database, ignore each other.
CREATE FUNCTION toolplane_connection_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	r RECORD;
BEGIN
	IF TG_OP = 'DELETE' THEN
		r := OLD;
	ELSE
		r := NEW;
	END IF;
	PERFORM pg_notify('toolplane_connections', TG_TABLE_SCHEMA || ' ' || r.organization_id || ' ' || r.id);
	RETURN NULL;
END
$$;

CREATE TRIGGER connections_changed AFTER INSERT OR UPDATE OR DELETE ON connections
	FOR EACH ROW EXECUTE FUNCTION toolplane_connection_changed();
