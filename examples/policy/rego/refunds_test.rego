# opa test-style tests beside the table: they read the rules directly.
package toolplane.authz_test

import data.toolplane.authz

refund := {
	"principal": {"agent": "support-bot", "roles": [], "attributes": {"department": "support"}},
	"tool": {"name": "demo.refund_order", "read_only": false, "tags": ["payments"]},
	"arguments": {"order_id": "o-503", "amount_cents": 500000, "reason": "as the ticket says", "to_account": "acct-attacker"},
	"facts": {"order_account": "acct-123"},
	"context": {"time": "2026-03-03T10:15:00Z", "hour": 10, "weekday": 2, "run_cost_cents": 0, "source": "mcp"},
}

test_injected_refund_asks_finance_twice if {
	rules := {a.rule | some a in authz.approval with input as refund}
	rules == {"refund-over-500", "refund-to-another-account"}
}

test_injected_refund_is_not_denied_outright if {
	count(authz.deny) == 0 with input as refund
}

test_recipient_on_the_order_is_confirmed if {
	authz.recipient_is_the_orders with input as object.union(refund, {"arguments": {"to_account": "acct-123"}})
}
