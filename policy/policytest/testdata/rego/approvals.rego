# Approvals: permitted calls a person must still approve.
package toolplane.authz

approval contains {"rule": "refund-over-500", "reason": "refunds over $500 need finance", "group": "finance"} if {
	input.tool.name == "payments.refund_order"
	input.arguments.amount_cents > 50000
}

approval contains {"rule": "refund-to-new-account", "reason": "the refund pays an account not on the order", "group": "payments-leads"} if {
	input.tool.name == "payments.refund_order"
	not refund_to_order_account
}

refund_to_order_account if input.arguments.account == input.facts.order.account

approval contains {"rule": "transfer-over-10000", "reason": "transfers over $10,000 need two people in finance", "group": "finance", "approvers": 2} if {
	input.tool.name == "payments.transfer"
	input.arguments.amount_cents > 1000000
}

approval contains {"rule": "weekend-transfer", "reason": "transfers at the weekend need treasury", "group": "treasury"} if {
	input.tool.name == "payments.transfer"
	input.context.weekday in {0, 6}
}

approval contains {"rule": "delete-asks-manager", "reason": "a deletion for a person needs their manager", "manager": true} if {
	input.tool.destructive
	input.user
}

approval contains {"rule": "delete-bulk", "reason": "deleting over 100 files needs two file admins", "group": "files-admins", "approvers": 2} if {
	input.tool.name == "files.delete"
	input.arguments.count > 100
}
