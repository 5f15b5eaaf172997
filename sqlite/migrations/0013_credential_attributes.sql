-- A key's attributes: what the organization's rules read of the agent (or
-- person) calling with it, such as its team. A JSON object of strings,
-- set when the key is minted.
ALTER TABLE credentials ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}'
	CHECK (json_valid(attributes) AND json_type(attributes) = 'object');
