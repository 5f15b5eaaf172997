package cli

import (
	"time"

	"github.com/spf13/cobra"
)

var (
	purgeColumns = []string{"@purges", "id", "before", "proposed_by", "expires_at", "confirmed_by"}
	sinkColumns  = []string{"@sinks", "name", "registered_at", "pending", "oldest"}
)

// newAuditPurgeCmd proposes, confirms or lists purges of the audit trail:
// deleting audit data takes two platform admins, one proposing
// (--before), another confirming (--confirm).
func newAuditPurgeCmd(a *app) *cobra.Command {
	var before, confirm string
	var list bool
	cmd := apiCmd(a, "purge (--before TIME | --confirm ID | --list)",
		"drop the organization's audit events older than a time, once a second platform admin confirms (platform_admin)",
		exactArgs(0, "no arguments"), purgeColumns,
		func(_ *cobra.Command, _ []string) (request, error) {
			set := 0
			for _, on := range []bool{before != "", confirm != "", list} {
				if on {
					set++
				}
			}
			if set != 1 {
				return request{}, usageErr("give one of --before TIME (propose), --confirm ID (confirm another admin's proposal) or --list")
			}
			switch {
			case list:
				return request{method: "GET", path: "/v1/audit/purges"}, nil
			case confirm != "":
				return request{method: "POST", path: "/v1/audit/purges/" + esc(confirm) + "/confirm"}, nil
			}
			t, err := time.Parse(time.RFC3339Nano, before)
			if err != nil {
				return request{}, usageErr("--before is a time in RFC 3339, such as 2025-01-01T00:00:00Z")
			}
			return request{method: "POST", path: "/v1/audit/purges", body: map[string]any{"before": t}}, nil
		})
	cmd.Long = `Drop the organization's audit events created before a time. Deleting
audit data is no one person's act: one platform admin proposes the purge
(--before), another confirms it (--confirm ID) within 24 hours; the
proposer cannot confirm their own. The drop keeps the chain verifiable:
whole ranges from the first stored event, each ending at a signed
checkpoint. The proposal, and each drop (its range, its checkpoint, who
proposed and who confirmed), are audit events of the organization's chain.`
	cmd.Flags().StringVar(&before, "before", "", "propose dropping the events created before this time (RFC 3339)")
	cmd.Flags().StringVar(&confirm, "confirm", "", "confirm the proposal with this ID, and drop its range")
	cmd.Flags().BoolVar(&list, "list", false, "list the organization's proposals")
	return cmd
}

// newAuditSinksCmd lists or drops the sinks the trail is exported to.
func newAuditSinksCmd(a *app) *cobra.Command {
	list := apiCmd(a, "list", "list the sinks registered for the audit export, with what waits for each (auditor)",
		exactArgs(0, "no arguments"), sinkColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/audit/sinks"}, nil
		})
	drop := apiCmd(a, "drop NAME", "stop exporting the audit trail to a sink and delete what waits for it (platform_admin)",
		exactArgs(1, "NAME"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "DELETE", path: "/v1/audit/sinks/" + esc(args[0])}, nil
		})
	return group(&cobra.Command{Use: "sinks", Short: "the sinks the audit trail is exported to"}, list, drop)
}
