-- One call (an organization's tool and idempotency key) has at most one
-- pending approval: a person is asked once, and rejecting it stops the
-- call whichever session, run or concurrent request asked.
--
-- FindApprovals reads one call's approvals in any state by this index; the
-- run and key index it replaces is no longer read (a derived key holds its
-- run, a caller's key names the call across runs).
CREATE INDEX approvals_by_call_key ON approvals (organization_id, tool, key, created_at, id);

-- Approvals a binary before this one filed twice for one call (identical
-- calls at the same moment, or a caller's key repeated in a new MCP
-- session) are settled before the index can hold: the oldest pending one
-- of each call stays (it is the one the first asker was answered with and
-- people were told of first), and each later one is expired, superseded
-- by it, with its approval_expired audit event naming it in
-- authorized_by, written in this same transaction. The table is locked
-- first, so no approval is filed between the settling and the index.
LOCK TABLE approvals IN SHARE ROW EXCLUSIVE MODE;

CREATE TEMPORARY TABLE superseded_approvals ON COMMIT DROP AS
SELECT a.organization_id, a.id, kept.id AS kept_id
FROM approvals a
JOIN LATERAL (
	SELECT b.id FROM approvals b
	WHERE b.organization_id = a.organization_id AND b.tool = a.tool AND b.key = a.key AND b.status = 'pending'
	ORDER BY b.created_at, b.id LIMIT 1) kept ON kept.id <> a.id
WHERE a.status = 'pending';

INSERT INTO audit_events (organization_id, id, run_id, agent_id, principal_id, user_id, tool, tool_version,
	source, outcome, arguments_hash, approval_id, authorized_by, replayed, latency_micros, created_at, key, reason)
SELECT a.organization_id, 'aud_approval_expired_' || a.id, a.run_id, a.principal_id, a.principal_id, '', a.tool, a.tool_version,
	'worker', 'approval_expired', a.arguments_hash, a.id, s.kept_id, false, 0,
	(extract(epoch FROM clock_timestamp()) * 1000000)::bigint, a.key,
	'expired: superseded by ' || s.kept_id || ', the pending approval of the same call'
FROM superseded_approvals s
JOIN approvals a ON a.organization_id = s.organization_id AND a.id = s.id
ON CONFLICT DO NOTHING;

UPDATE approvals a SET
	status = 'expired',
	resolved_at = (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
	reason = 'expired: superseded by ' || s.kept_id || ', the pending approval of the same call',
	version = a.version + 1
FROM superseded_approvals s
WHERE a.organization_id = s.organization_id AND a.id = s.id;

CREATE UNIQUE INDEX approvals_one_pending ON approvals (organization_id, tool, key) WHERE status = 'pending';

DROP INDEX approvals_by_run_key;
