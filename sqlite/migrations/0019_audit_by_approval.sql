-- An approval's view finds the calls it let through by their audit events,
-- in whichever run they ran (a caller's key scopes an approval across runs
-- and sessions): those events are found by approval, not by a scan of the
-- organization's trail.
CREATE INDEX audit_events_by_approval ON audit_events (organization_id, approval_id, created_at, id);
