-- Rate limits that hold across nodes are kept where the nodes meet
-- (PostgreSQL's rate_limits table, or Redis). An embedded SQLite
-- deployment is one node, whose limits are kept in memory: there is
-- nothing to create here, and the number is taken so both dialects keep
-- the same sequence.
SELECT 1;
