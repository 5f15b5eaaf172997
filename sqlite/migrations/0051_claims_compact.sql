-- Storage per call, third pass (issue 35). A write call's claim, leaner:
--
-- * A derived idempotency key ("3:run,…,64:" and the 64 lowercase hex
--   digits of the arguments' hash) is stored as the text before the
--   digits and the 32 bytes they spell, in the row and in the primary
--   key's index: 32 bytes fewer in each. A caller's key ("6:caller,…")
--   and any other text stay the text they are.
-- * The request hash (64 lowercase hex digits) is stored as its 32 bytes,
--   and not at all (the integer 0, in the record's header alone) when the
--   key is derived: its digits are the key's own (invoke.Key), read back
--   from the key.
--
-- Readers read a BLOB back as the text it was (sqlstore.ClaimKeyRead,
-- ClaimHashRead), and lookups bind the key in the form it is stored in
-- (sqlstore.PackClaimKey), so they stay searches of the primary key. The
-- stored form is a function of the text alone and one-to-one (a BLOB is
-- never equal to a TEXT): (organization, tool, key) is exactly as unique
-- as it was. The columns are ANY to hold either (a STRICT TEXT column
-- refuses a BLOB).
--
-- The list of uncertain claims orders ties (one organization, one
-- microsecond, one tool) by the key's text, bytewise, as it did: its
-- index, which holds uncertain claims alone, holds the key's text (the
-- read expression), so the list still reads it in order without a sort.
--
-- SQLite changes a column's type only by rebuilding the table: the rows
-- are copied with their rowids, converted as sqlstore.PackClaimKey and
-- PackClaimHash convert (the test is on the bytes: a key holding a NUL
-- byte stays text), and the indexes are made again.
CREATE TABLE claims_compact (
	organization_id TEXT NOT NULL,
	tool            TEXT NOT NULL,
	key             ANY NOT NULL,
	request_hash    ANY NOT NULL,
	status          TEXT NOT NULL,
	result          BLOB,
	owner           TEXT NOT NULL,
	lease_until     INTEGER,
	dispatched      INTEGER NOT NULL CHECK (dispatched IN (0, 1)),
	attempts        INTEGER NOT NULL,
	run_id          TEXT NOT NULL,
	step_path       TEXT NOT NULL,
	arguments       BLOB,
	invocation      BLOB,
	reason          TEXT NOT NULL,
	reconciled_by   TEXT NOT NULL,
	note            TEXT NOT NULL,
	version         INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	node            TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (organization_id, tool, key)
) STRICT;

-- k and h are the key's and the hash's bytes; derived says whether the
-- key is of a derived key's form (sqlstore.PackClaimKey). The digits'
-- bytes are unhex of them; the text before them is joined to them through
-- hex, since || answers a text. A derived key's request hash is the key's
-- own digits, stored as the integer 0 (sqlstore.SameHash).
INSERT INTO claims_compact (rowid, organization_id, tool, key, request_hash, status, result, owner,
	lease_until, dispatched, attempts, run_id, step_path, arguments, invocation, reason,
	reconciled_by, note, version, created_at, updated_at, node)
SELECT id, organization_id, tool,
	CASE WHEN derived THEN unhex(hex(substr(k, 1, length(k) - 64)) || CAST(substr(k, -64) AS TEXT)) ELSE key END,
	CASE WHEN derived AND substr(k, -64) = h THEN 0
		WHEN length(h) = 64 AND instr(h, x'00') = 0 AND CAST(h AS TEXT) NOT GLOB '*[^0-9a-f]*' THEN unhex(CAST(h AS TEXT))
		ELSE request_hash END,
	status, result, owner,
	lease_until, dispatched, attempts, run_id, step_path, arguments, invocation, reason,
	reconciled_by, note, version, created_at, updated_at, node
FROM (SELECT *,
	length(k) >= 74 AND substr(k, 1, 6) = CAST('3:run,' AS BLOB) AND substr(k, -68, 4) = CAST(',64:' AS BLOB)
		AND instr(k, x'00') = 0 AND CAST(substr(k, -64) AS TEXT) NOT GLOB '*[^0-9a-f]*' AS derived
	FROM (SELECT claims.*, claims.rowid AS id, CAST(key AS BLOB) AS k, CAST(request_hash AS BLOB) AS h FROM claims));

DROP TABLE claims;
ALTER TABLE claims_compact RENAME TO claims;

-- As they were (0002, 0006, 0015).
CREATE INDEX claims_by_lease ON claims (lease_until) WHERE status = 'processing';
CREATE INDEX claims_by_update ON claims (updated_at) WHERE status = 'completed';
CREATE INDEX claims_by_node ON claims (node) WHERE status = 'processing';
CREATE INDEX claims_uncertain_by_update ON claims (updated_at) WHERE status = 'uncertain';
-- The uncertain claims by organization (0050), the key as its text
-- (sqlstore.ClaimKeyRead("key"), written out: the planner matches the
-- expression as written).
CREATE INDEX claims_by_status ON claims (organization_id, created_at, tool,
	iif(typeof(key) = 'blob', CAST(substr(key, 1, length(key) - 32) AS TEXT) || lower(hex(substr(key, -32))), key))
	WHERE status = 'uncertain';
