# Reading data: support agents read public and internal data; restricted
# data needs an agent cleared for it, whoever asks.
package toolplane.authz

allow contains "support-reads-open-data" if {
	input.principal.attributes.department == "support"
	input.tool.read_only
	input.tool.classification in {"public", "internal"}
}

allow contains "cleared-agents-read-restricted" if {
	input.tool.read_only
	cleared
}

deny contains {
	"rule": "restricted-needs-clearance",
	"reason": "this tool touches restricted data and the agent is not cleared for it",
} if {
	input.tool.classification == "restricted"
	not cleared
}

cleared if input.principal.attributes.clearance == "restricted"
