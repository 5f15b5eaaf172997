-- A key's attributes: what the organization's rules read of the agent (or
-- person) calling with it, such as its team. A JSON object of strings,
-- set when the key is minted.
ALTER TABLE credentials ADD COLUMN attributes JSONB NOT NULL DEFAULT '{}'::jsonb
	CHECK (jsonb_typeof(attributes) = 'object');
