-- Storage per call (issue 35). The approval index held an entry for
-- every event, while only the events an approval let through (or that
-- name the approval a call waits for) carry one: most calls approve
-- nothing, and each paid ~74 bytes and a b-tree write for an entry no
-- query reads. Partial now, like the compliance indexes (0030):
-- ListAudit's approval filter adds the literal approval_id <> '' that lets
-- SQLite use it.
DROP INDEX audit_events_by_approval;
CREATE INDEX audit_events_by_approval ON audit_events (organization_id, approval_id, created_at, id)
	WHERE approval_id <> '';
