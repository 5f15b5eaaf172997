-- Every change that can end an OAuth consent is announced, in the
-- transaction that makes it, on the channel toolplane_oauth, as migration
-- 0011 announces connections: the payload is the table's schema, the
-- organization and the row's ID, separated by spaces. Nodes keep whether a
-- consent stands in memory and forget it when it is announced
-- (postgres.Store.WatchChanges, toolplane.TopicOAuth). What a consent
-- stands on is its grant row and, when the person consented with their own
-- key, that key's credential row; a trigger announces whatever wrote them,
-- the store's statements or an operator's.
--
-- New rows are not announced (nothing kept can have read them), and a
-- credential's update only when it changes what a consent reads of it:
-- TouchCredential, on every authenticated request, writes last_used_at
-- alone and stays silent.
CREATE FUNCTION toolplane_oauth_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	r RECORD;
BEGIN
	IF TG_OP = 'DELETE' THEN
		r := OLD;
	ELSE
		r := NEW;
	END IF;
	PERFORM pg_notify('toolplane_oauth', TG_TABLE_SCHEMA || ' ' || r.organization_id || ' ' || r.id);
	-- A row moved to another organization (by hand: no statement of the
	-- store does) is announced in the one it left too.
	IF TG_OP = 'UPDATE' AND OLD.organization_id IS DISTINCT FROM NEW.organization_id THEN
		PERFORM pg_notify('toolplane_oauth', TG_TABLE_SCHEMA || ' ' || OLD.organization_id || ' ' || OLD.id);
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER oauth_grants_changed AFTER UPDATE OR DELETE ON oauth_grants
	FOR EACH ROW EXECUTE FUNCTION toolplane_oauth_changed();

CREATE TRIGGER credentials_deleted_for_oauth AFTER DELETE ON credentials
	FOR EACH ROW EXECUTE FUNCTION toolplane_oauth_changed();

CREATE TRIGGER credentials_changed_for_oauth AFTER UPDATE ON credentials
	FOR EACH ROW
	WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at
		OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
		OR OLD.roles IS DISTINCT FROM NEW.roles
		OR OLD.kind IS DISTINCT FROM NEW.kind
		OR OLD.subject IS DISTINCT FROM NEW.subject
		OR OLD.organization_id IS DISTINCT FROM NEW.organization_id)
	EXECUTE FUNCTION toolplane_oauth_changed();
