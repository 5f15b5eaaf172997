-- The call that made this one, for a tool-to-tool call: the audit event ID
-- of its parent, so the trail of a chain of calls links each to the call
-- above it.
ALTER TABLE audit_events ADD COLUMN parent_id TEXT COLLATE "C" NOT NULL DEFAULT '';
