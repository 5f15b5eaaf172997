-- ListApprovalsNewest by group: a person's inbox reads, for each group
-- they answer for, that group's newest approvals in a state, so a page
-- costs its own rows however many approvals wait for other groups.
CREATE INDEX approvals_by_group ON approvals (organization_id, status, approver_group, created_at, id);
