package cli

import (
	"strconv"

	"github.com/spf13/cobra"
)

// spendLineColumns are a spend report's table: its lines.
var spendLineColumns = []string{"@lines", "key", "calls", "cost_cents"}

func newSpendCmd(a *app) *cobra.Command {
	var from, to, by string
	report := apiCmd(a, "report [--by agent|tool|day] [--from WHEN] [--to WHEN]",
		"what the organization's metered calls cost, by agent, tool or UTC day (platform_admin or auditor)",
		exactArgs(0, "no arguments"), spendLineColumns, func(*cobra.Command, []string) (request, error) {
			switch by {
			case "", "agent", "tool", "day":
			default:
				return request{}, usageErr("--by %q: want agent, tool or day", by)
			}
			return request{method: "GET", path: "/v1/spend" + query("by", by, "from", from, "to", to)}, nil
		})
	report.Long = `report groups the usage rows of the organization's metered calls created
from --from up to (not including) --to by agent, tool or UTC day, each line
with its calls and cost in cents. WHEN is an RFC 3339 time or a date
(2026-12-01, midnight UTC); --to defaults to now and --from to 30 days
before it. -o json shows the totals beside the lines.

  toolplane spend report --by tool --from 2026-12-01`
	f := report.Flags()
	f.StringVar(&by, "by", "day", "what each line groups: agent, tool or day")
	f.StringVar(&from, "from", "", "the first instant reported (RFC 3339, or a date as midnight UTC)")
	f.StringVar(&to, "to", "", "the instant the report ends before (RFC 3339, or a date as midnight UTC)")

	var cents int64
	set := apiCmd(a, "set --daily-cents N", "set the most the organization's metered calls may cost in one UTC day (platform_admin)",
		exactArgs(0, "no arguments"), nil, func(cmd *cobra.Command, _ []string) (request, error) {
			if !cmd.Flags().Changed("daily-cents") {
				return request{}, usageErr("give --daily-cents, the most one UTC day's metered calls may cost, in cents")
			}
			return request{method: "PUT", path: "/v1/spend/ceiling", body: map[string]any{"daily_cents": cents}}, nil
		})
	set.Long = `set caps what all of the organization's metered calls may cost in one UTC
day, beside each run's own ceiling. Once a day's spend reached it, every
node refuses the organization's metered calls with budget_exhausted, naming
the ceiling and what was spent, until the next UTC day or a higher ceiling.
A day may end past it by the calls in flight when it was reached, one each.

  toolplane spend ceiling set --daily-cents ` + strconv.Itoa(50_000)
	set.Flags().Int64Var(&cents, "daily-cents", 0, "the ceiling, in cents")
	show := apiCmd(a, "show", "show the daily ceiling and today's spend (platform_admin or auditor)", exactArgs(0, "no arguments"), nil,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/spend/ceiling"}, nil
		})
	del := apiCmd(a, "delete", "remove the daily ceiling; runs keep their own (platform_admin)", exactArgs(0, "no arguments"), nil,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "DELETE", path: "/v1/spend/ceiling"}, nil
		})
	ceiling := group(&cobra.Command{Use: "ceiling", Short: "the organization's daily spend ceiling"}, set, show, del)
	return group(&cobra.Command{Use: "spend", Short: "what the organization's metered calls cost, and its daily ceiling"}, report, ceiling)
}
