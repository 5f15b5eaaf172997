# Refunds (the demo's demo.refund_order): support agents (the department
# their identity provider's token names) may refund, but a person in
# finance approves a refund over $500, and one that names an account
# (to_account) other than the order's (the order_account fact). A
# refund that names no account goes back to the order's own. The second
# rule asks for a person whenever it cannot confirm a named recipient, so
# a missing fact never lets a refund to another account through unseen.
package toolplane.authz

refund := "demo.refund_order"

allow contains "support-may-refund" if {
	input.principal.attributes.department == "support"
	input.tool.name == refund
}

approval contains {
	"rule": "refund-over-500",
	"reason": "refunds over $500 need approval by finance",
	"group": "finance",
} if {
	input.tool.name == refund
	input.arguments.amount_cents > 50000
}

approval contains {
	"rule": "refund-to-another-account",
	"reason": "the refund would pay an account that is not the order's",
	"group": "finance",
} if {
	input.tool.name == refund
	input.arguments.to_account
	not recipient_is_the_orders
}

recipient_is_the_orders if input.arguments.to_account == input.facts.order_account

# An agent acting for a person may refund only when that person may:
# delegated authority needs both.
deny contains {
	"rule": "user-may-not-refund",
	"reason": "the person this agent acts for is not in support",
} if {
	input.tool.name == refund
	input.user
	not "support" in input.user.groups
}
