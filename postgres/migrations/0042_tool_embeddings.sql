-- Where an embeddings model places each tool version's text
-- (toolplane.EmbeddingStore), for semantic search: one row per
-- organization, version and model ("" is the platform's own tools, served
-- to every organization). text_hash is the SHA-256 of the text embedded,
-- so a node re-embeds a version whose served text changed; vector is
-- little-endian float32s. Nothing here is shown to anyone: a node reads
-- every row of its model into memory (the primary key's order serves
-- that), and scores its callers' candidates against the query's vector.
CREATE TABLE tool_embeddings (
	model           TEXT COLLATE "C" NOT NULL,
	organization_id TEXT COLLATE "C" NOT NULL,
	name            TEXT COLLATE "C" NOT NULL,
	version         TEXT COLLATE "C" NOT NULL,
	text_hash       TEXT COLLATE "C" NOT NULL,
	vector          BYTEA NOT NULL,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (model, organization_id, name, version)
);
