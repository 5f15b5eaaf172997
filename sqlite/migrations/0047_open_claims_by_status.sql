-- The organization's claims by state (ListClaims, CountOrgClaims) are
-- read for open claims only: the uncertain actions a person reconciles,
-- and the processing ones. A completed claim waits only for the retention
-- sweep, which reads claims_by_update, yet its entry here was about 70
-- bytes of every write call on disk and a second index change in every
-- completion. The queries name the condition (status <> 'completed') so
-- the planner can use the index; a list of completed claims, which nothing
-- but the tests asks for, reads the table.
DROP INDEX claims_by_status;
CREATE INDEX claims_by_status ON claims (organization_id, status, created_at, tool, key)
	WHERE status <> 'completed';
