# Operations: the on-call team changes production, on weekdays between
# 09:00 and 18:00 in the organization's zone; outside those hours every
# write tagged production is refused, whoever asks.
package toolplane.authz

allow contains "oncall-changes-production" if {
	input.principal.team == "oncall"
	"production" in input.tool.tags
}

deny contains {
	"rule": "production-writes-in-business-hours",
	"reason": "writes to production happen on weekdays from 09:00 to 18:00 only",
} if {
	not input.tool.read_only
	"production" in input.tool.tags
	not business_hours
}

business_hours if {
	input.context.weekday in {1, 2, 3, 4, 5}
	input.context.hour >= 9
	input.context.hour < 18
}
