-- The console's traffic overview (toolplane.TrafficStore) reads an
-- organization's calls of the last hour or day from the audit trail:
-- counted per tool, agent, outcome and latency bucket, and per step of a
-- series. This index serves those reads alone: organization and time as
-- its key, every column they read included, so the read is an index-only
-- scan of one range (the events' rows are wide, with arguments and
-- policy input). Partial on call events, the only ones counted.
CREATE INDEX audit_events_traffic ON audit_events (organization_id, created_at)
	INCLUDE (source, tool, agent_id, outcome, latency_micros, cost_cents)
	WHERE kind = '';
