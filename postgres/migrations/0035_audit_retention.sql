-- Retention of the audit trail (auditchain.Retain). The application role
-- keeps no DELETE right on the trail: a range is dropped through
-- audit_drop, a SECURITY DEFINER function owned by the tables' owner,
-- which drops only a whole prefix of one organization's chain, up to a
-- checkpoint stored at its end whose hash is the chain's there.

-- The door the append-only trigger leaves open now names the range's end
-- too (toolplane.audit_retention_through): a row may be deleted only if
-- it is of the named organization, at or before that end, and a
-- checkpoint is stored exactly there.
CREATE OR REPLACE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	through BIGINT;
BEGIN
	IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'audit_events'
		AND current_setting('toolplane.audit_retention', true) = OLD.organization_id THEN
		through := NULLIF(current_setting('toolplane.audit_retention_through', true), '')::BIGINT;
		IF through IS NOT NULL AND OLD.seq <= through AND EXISTS (SELECT 1 FROM audit_checkpoints c
			WHERE c.organization_id = OLD.organization_id AND c.seq = through) THEN
			RETURN OLD;
		END IF;
	END IF;
	RAISE EXCEPTION 'the audit trail is append-only: % on % refused', TG_OP, TG_TABLE_NAME
		USING ERRCODE = 'insufficient_privilege';
END
$$;

-- And a statement that deleted through the door left no chained row of
-- the range behind: retention drops a whole prefix, never a row in the
-- middle of a chain.
CREATE FUNCTION audit_retention_whole() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	org     TEXT := current_setting('toolplane.audit_retention', true);
	through BIGINT := NULLIF(current_setting('toolplane.audit_retention_through', true), '')::BIGINT;
BEGIN
	IF COALESCE(org, '') <> '' AND EXISTS (SELECT 1 FROM audit_events
		WHERE organization_id = org AND seq > 0 AND seq <= COALESCE(through, 0)) THEN
		RAISE EXCEPTION 'audit retention drops a whole prefix of a chain: rows of % up to % remain', org, through
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER audit_events_retention_whole AFTER DELETE ON audit_events
	FOR EACH STATEMENT EXECUTE FUNCTION audit_retention_whole();

-- The youngest event retention may drop is at least min_age_seconds old
-- (one row; a day unless the database's owner sets another). The
-- application role may not write it: a role that can call audit_drop but
-- not change this cannot drop what was just written, whatever checkpoint
-- it brings (the function cannot check a checkpoint's signature; verify
-- does, and names a forged one).
CREATE TABLE audit_retention_floor (
	one             BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
	min_age_seconds BIGINT NOT NULL CHECK (min_age_seconds >= 0)
);
INSERT INTO audit_retention_floor (min_age_seconds) VALUES (86400);
REVOKE ALL ON audit_retention_floor FROM PUBLIC;

-- audit_drop is retention's one way in: it checks the chain's hash at
-- p_seq, stores the checkpoint (or finds the same one stored), opens the
-- door for this organization and range, deletes the prefix, and closes
-- the door again. SQLSTATE TP404: no event at p_seq; TP409: the hash
-- there is not the checkpoint's; TP403: the event at p_seq is younger
-- than audit_retention_floor.
CREATE FUNCTION audit_drop(p_org TEXT, p_seq BIGINT, p_hash BYTEA, p_created_at BIGINT, p_key_id TEXT, p_signature BYTEA)
	RETURNS BIGINT LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
	chained  BYTEA;
	stored   BYTEA;
	n        BIGINT;
	youngest BIGINT;
	floor_s  BIGINT;
BEGIN
	SELECT hash, created_at INTO chained, youngest FROM audit_events WHERE organization_id = p_org AND seq = p_seq;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no event of % at %', p_org, p_seq USING ERRCODE = 'TP404';
	END IF;
	SELECT min_age_seconds INTO floor_s FROM audit_retention_floor;
	IF youngest > (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT - COALESCE(floor_s, 86400) * 1000000 THEN
		RAISE EXCEPTION 'the event of % at % is younger than the retention floor (% s)', p_org, p_seq, COALESCE(floor_s, 86400)
			USING ERRCODE = 'TP403';
	END IF;
	IF chained IS DISTINCT FROM p_hash THEN
		RAISE EXCEPTION 'the chain''s hash of % at % is not the checkpoint''s', p_org, p_seq USING ERRCODE = 'TP409';
	END IF;
	INSERT INTO audit_checkpoints (organization_id, seq, hash, created_at, key_id, signature)
		VALUES (p_org, p_seq, p_hash, p_created_at, p_key_id, p_signature)
		ON CONFLICT (organization_id, seq) DO NOTHING;
	SELECT hash INTO stored FROM audit_checkpoints WHERE organization_id = p_org AND seq = p_seq;
	IF stored IS DISTINCT FROM chained THEN
		RAISE EXCEPTION 'the checkpoint of % at % is not the chain''s', p_org, p_seq USING ERRCODE = 'TP409';
	END IF;
	PERFORM set_config('toolplane.audit_retention', p_org, true);
	PERFORM set_config('toolplane.audit_retention_through', p_seq::TEXT, true);
	DELETE FROM audit_events WHERE organization_id = p_org AND seq <= p_seq;
	GET DIAGNOSTICS n = ROW_COUNT;
	PERFORM set_config('toolplane.audit_retention', '', true);
	PERFORM set_config('toolplane.audit_retention_through', '', true);
	RETURN n;
END
$$;
-- Only the roles granted it may drop (docs/audit-chain.md: the
-- application role is).
REVOKE ALL ON FUNCTION audit_drop(TEXT, BIGINT, BYTEA, BIGINT, TEXT, BYTEA) FROM PUBLIC;

-- A chain's head only moves forward, one event at a time: the next
-- number, chained to the hash it held. It is never deleted.
CREATE FUNCTION audit_heads_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'an audit chain''s head only moves forward: % of % refused', TG_OP, OLD.organization_id
		USING ERRCODE = 'insufficient_privilege';
END
$$;
-- WHEN is checked without calling the function: the append's own update
-- (every event stored) costs no PL/pgSQL call.
CREATE TRIGGER audit_heads_forward BEFORE UPDATE ON audit_heads FOR EACH ROW
	WHEN (NEW.organization_id <> OLD.organization_id OR NEW.seq <> OLD.seq + 1 OR NEW.prev_hash <> OLD.hash)
	EXECUTE FUNCTION audit_heads_refuse();
CREATE TRIGGER audit_heads_no_delete BEFORE DELETE ON audit_heads FOR EACH ROW
	EXECUTE FUNCTION audit_heads_refuse();
REVOKE DELETE, TRUNCATE ON audit_heads FROM PUBLIC;

-- A manual purge (auditchain purge proposals): one platform admin
-- proposes dropping the organization's events before before_at, another
-- confirms before expires_at; the proposer never confirms their own.
CREATE TABLE audit_purges (
	id              TEXT COLLATE "C" PRIMARY KEY,
	organization_id TEXT COLLATE "C" NOT NULL,
	before_at       BIGINT NOT NULL,
	proposed_by     TEXT COLLATE "C" NOT NULL,
	proposed_at     BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL,
	confirmed_by    TEXT COLLATE "C" NOT NULL DEFAULT '',
	confirmed_at    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX audit_purges_by_organization ON audit_purges (organization_id, proposed_at);
