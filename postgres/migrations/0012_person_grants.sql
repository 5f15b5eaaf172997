-- Grants to people: a person (user_id) or a group of people (user_group)
-- may be granted tools, which an agent acting for them needs beside its
-- own grant. Every row names exactly one subject.
ALTER TABLE grants ADD COLUMN user_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE grants ADD COLUMN user_group TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE grants ADD CONSTRAINT grants_one_subject
	CHECK ((agent_id <> '')::int + (user_id <> '')::int + (user_group <> '')::int <= 1);
