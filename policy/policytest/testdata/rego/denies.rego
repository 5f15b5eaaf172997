# Denies: each wins over every grant.
package toolplane.authz

deny contains {"rule": "blocked-tag", "reason": "tools tagged blocked may not be called"} if {
	"blocked" in input.tool.tags
}

deny contains {"rule": "pii-needs-clearance", "reason": "this tool reads personal data and the agent is not cleared for it"} if {
	"pii" in input.tool.tags
	not input.principal.attributes.pii_clearance
}

deny contains {"rule": "restricted-for-auditors", "reason": "restricted data is for auditors"} if {
	input.tool.classification == "restricted"
	not "auditor" in input.principal.roles
}

deny contains {"rule": "no-pre-release-crm", "reason": "pre-release versions of the CRM may not be called"} if {
	input.tool.name == "crm.get_customer"
	startswith(input.tool.version, "0.")
}

deny contains {"rule": "production-hours", "reason": "writes to production happen on weekdays from 09:00 to 18:00 only"} if {
	not input.tool.read_only
	"production" in input.tool.tags
	not business_hours
}

business_hours if {
	input.context.weekday in {1, 2, 3, 4, 5}
	input.context.hour >= 9
	input.context.hour < 18
}

deny contains {"rule": "run-cost-cap", "reason": "the run has spent $100: its writes stop here"} if {
	not input.tool.read_only
	input.context.run_cost_cents >= 10000
}

deny contains {"rule": "admin-not-over-mcp", "reason": "admin tools are not called over MCP"} if {
	"admin" in input.tool.tags
	input.context.source == "mcp"
}

deny contains {"rule": "cross-tenant", "reason": "the customer belongs to another tenant"} if {
	input.facts.customer.tenant != input.principal.tenant
}
