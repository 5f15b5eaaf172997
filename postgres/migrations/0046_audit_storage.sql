-- Storage per call (issue 35): the approval index holds only the events
-- that name an approval (most calls approve nothing); ListAudit's
-- approval filter adds the literal approval_id <> '' that proves the
-- index's condition whatever plan the bound value gets.
DROP INDEX audit_events_by_approval;
CREATE INDEX audit_events_by_approval ON audit_events (organization_id, approval_id, created_at, id)
	WHERE approval_id <> '';
