-- The background sweeps read one claim state each: expired leases among
-- processing claims, retention among completed ones. Every write of a claim
-- keeps every index on it in step, a page of the WAL each; an index holding
-- only the state its sweep reads costs nothing for a claim in another
-- state. A new claim no longer writes the retention index, and an update
-- of a processing claim that stays processing (the dispatch mark) never
-- does. The sweeps name the state as a literal, which is what lets SQLite
-- use a partial index for them.
DROP INDEX claims_by_lease;
DROP INDEX claims_by_update;
CREATE INDEX claims_by_lease ON claims (lease_until) WHERE status = 'processing';
CREATE INDEX claims_by_update ON claims (updated_at) WHERE status = 'completed';
