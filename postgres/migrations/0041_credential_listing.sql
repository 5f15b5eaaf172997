-- How the MCP endpoint lists the tools an agent's key may call: '' (the
-- default, every tool), 'full', 'meta' (the meta-tools alone) or 'hybrid'
-- (the agent's most-used tools, listing_top of them, beside the
-- meta-tools; 0 takes the default number). Keys minted before keep every
-- tool listed, as they had.
ALTER TABLE credentials ADD COLUMN listing TEXT COLLATE "C" NOT NULL DEFAULT ''
	CHECK (listing IN ('', 'full', 'meta', 'hybrid'));
ALTER TABLE credentials ADD COLUMN listing_top INTEGER NOT NULL DEFAULT 0
	CHECK (listing_top BETWEEN 0 AND 50);
