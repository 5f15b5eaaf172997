-- Vendor ceilings (toolplane.VendorCeiling): per organization and
-- provider, the vendor account's concurrency limit and the lanes whose
-- runs call it, checked by package ceiling before they are stored. lanes
-- is a JSON array read and written whole, never queried. Times are BIGINT
-- unix microseconds UTC.
CREATE TABLE vendor_ceilings (
	organization_id TEXT COLLATE "C" NOT NULL,
	provider        TEXT COLLATE "C" NOT NULL,
	account_limit   BIGINT NOT NULL,
	lanes           JSONB NOT NULL CHECK (jsonb_typeof(lanes) = 'array'),
	note            TEXT NOT NULL,
	updated_by      TEXT COLLATE "C" NOT NULL,
	updated_at      BIGINT NOT NULL,
	version         BIGINT NOT NULL,
	PRIMARY KEY (organization_id, provider)
);
