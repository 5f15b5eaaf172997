-- The node instance running an asynchronous call: a worker that finds the
-- call running on a node that still heartbeats waits for it instead of
-- running it a second time (a job River rescued while its first run went on).
ALTER TABLE async_calls ADD COLUMN runner TEXT COLLATE "C" NOT NULL DEFAULT '';
-- The person an asynchronous call was made for: a token the agent holds
-- for another person does not read it.
ALTER TABLE async_calls ADD COLUMN user_id TEXT COLLATE "C" NOT NULL DEFAULT '';
