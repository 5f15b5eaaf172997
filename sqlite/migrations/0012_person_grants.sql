-- Grants to people: a person (user_id) or a group of people (user_group)
-- may be granted tools, which an agent acting for them needs beside its
-- own grant. Every row names exactly one subject.
ALTER TABLE grants ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE grants ADD COLUMN user_group TEXT NOT NULL DEFAULT ''
	CHECK ((agent_id <> '') + (user_id <> '') + (user_group <> '') <= 1);
