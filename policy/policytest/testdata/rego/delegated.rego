# Delegated authority: an agent acting for a person may do only what
# that person may.
package toolplane.authz

deny contains {"rule": "user-finance-group", "reason": "the person this agent acts for is not in finance"} if {
	input.user
	startswith(input.tool.name, "payments.")
	not "finance" in input.user.groups
}

deny contains {"rule": "user-editor-role", "reason": "the person this agent acts for may not delete"} if {
	input.user
	input.tool.destructive
	not "editor" in input.user.roles
}
