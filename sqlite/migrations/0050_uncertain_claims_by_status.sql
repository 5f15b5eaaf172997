-- The organization's claims by state are read, outside the tests, for
-- uncertain actions only: the list a person reconciles, its bounded count
-- in the console and the metrics' count. A processing claim's entry here
-- was written by every write call's claim and removed again by its
-- completion a moment later: two index changes and a page appended to the
-- WAL at each of the two commits, for entries nothing read. The index now
-- holds uncertain claims alone, and the queries for them name the
-- condition (status = 'uncertain') so the planner can use it; a list of
-- processing claims by organization, which only the tests ask for, reads
-- the table. In-flight claims keep their own indexes: by lease for the
-- sweep, by node for a dead node's work.
DROP INDEX claims_by_status;
CREATE INDEX claims_by_status ON claims (organization_id, created_at, tool, key)
	WHERE status = 'uncertain';
