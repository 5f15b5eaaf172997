-- Vendor ceilings (toolplane.VendorCeiling): per organization and
-- provider, the vendor account's concurrency limit and the lanes whose
-- runs call it, checked by package ceiling before they are stored. lanes
-- is a JSON array read and written whole, never queried. Times are INTEGER
-- unix microseconds UTC.
CREATE TABLE vendor_ceilings (
	organization_id TEXT NOT NULL,
	provider        TEXT NOT NULL,
	account_limit   INTEGER NOT NULL,
	lanes           TEXT NOT NULL CHECK (json_valid(lanes) AND json_type(lanes) = 'array'),
	note            TEXT NOT NULL,
	updated_by      TEXT NOT NULL,
	updated_at      INTEGER NOT NULL,
	version         INTEGER NOT NULL,
	PRIMARY KEY (organization_id, provider)
) STRICT, WITHOUT ROWID;
