-- A deprecation keeps the owner's note (why, and what to move to) apart
-- from the last review decision's note, so neither overwrites the other.
ALTER TABLE tool_versions ADD COLUMN deprecation_note TEXT NOT NULL DEFAULT '';
