# Grants: who may call what, by role, team, name and date.
package toolplane.authz

allow contains "grant-crm" if {
	"support" in input.principal.roles
	startswith(input.tool.name, "crm.")
}

allow contains {"rule": "grant-reporter", "reason": "the reporter writes reports"} if {
	input.principal.agent == "reporter"
	input.tool.name == "reports.generate"
}

allow contains "grant-payments" if {
	"payments" in input.principal.roles
	startswith(input.tool.name, "payments.")
}

allow contains "grant-files" if {
	"support" in input.principal.roles
	startswith(input.tool.name, "files.")
}

allow contains "grant-oncall-production" if {
	input.principal.team == "oncall"
	"production" in input.tool.tags
}

allow contains "grant-campaign-until-2027" if {
	"marketing" in input.principal.roles
	input.tool.name == "mail.campaign"
	time.parse_rfc3339_ns(input.context.time) < time.parse_rfc3339_ns("2027-01-01T00:00:00Z")
}

allow contains "grant-admin-tools" if {
	"admin" in input.principal.roles
	"admin" in input.tool.tags
}

allow contains "grant-auditor-reads" if {
	"auditor" in input.principal.roles
	input.tool.read_only
}
