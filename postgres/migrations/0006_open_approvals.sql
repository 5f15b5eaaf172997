-- FindOpenApprovals: the pending and approved approvals of one principal's
-- call (tool and arguments hash) in any run, newest first. A later session
-- of the same agent asking the same thing is offered the approval already
-- filed instead of a new one.
CREATE INDEX approvals_by_call ON approvals (organization_id, principal_id, tool, arguments_hash, created_at, id);
