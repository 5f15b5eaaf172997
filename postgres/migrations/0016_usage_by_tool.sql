-- ToolUsage: an approval card's cost estimate reads one tool's newest
-- usage rows of an organization from this index alone (cost_cents is in
-- it), so the estimate costs the rows it reads, however busy other tools
-- are.
CREATE INDEX usage_by_tool ON usage (organization_id, tool, created_at) INCLUDE (cost_cents);
