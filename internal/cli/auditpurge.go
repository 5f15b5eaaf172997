package cli

import (
	"time"

	"github.com/spf13/cobra"
)

var (
	purgeColumns = []string{"@purges", "id", "before", "proposed_by", "expires_at", "confirmed_by", "done_at"}
	sinkColumns  = []string{"@sinks", "name", "registered_at", "pending", "oldest"}
)

// newAuditPurgeCmd proposes, confirms, resumes or lists purges of the
// audit trail: deleting audit data takes two platform admins, one
// proposing (--before), another confirming (--confirm); a confirmed purge
// whose drop did not finish is resumed (--resume).
func newAuditPurgeCmd(a *app) *cobra.Command {
	var before, confirm, resume string
	var list bool
	cmd := apiCmd(a, "purge (--before TIME | --confirm ID | --resume ID | --list)",
		"drop the organization's audit events older than a time, once a second platform admin confirms (platform_admin)",
		exactArgs(0, "no arguments"), purgeColumns,
		func(_ *cobra.Command, _ []string) (request, error) {
			set := 0
			for _, on := range []bool{before != "", confirm != "", resume != "", list} {
				if on {
					set++
				}
			}
			if set != 1 {
				return request{}, usageErr("give one of --before TIME (propose), --confirm ID (confirm another admin's proposal), --resume ID (finish a confirmed purge's drop) or --list")
			}
			switch {
			case list:
				return request{method: "GET", path: "/v1/audit/purges"}, nil
			case confirm != "":
				return request{method: "POST", path: "/v1/audit/purges/" + esc(confirm) + "/confirm"}, nil
			case resume != "":
				return request{method: "POST", path: "/v1/audit/purges/" + esc(resume) + "/resume"}, nil
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
checkpoint. The proposal, the confirmation, each drop (its range, its
checkpoint, who proposed and who confirmed) and the purge's completion
are audit events of the organization's chain.

A drop that fails after the confirmation (a store error, a node stopped)
leaves the purge confirmed and not done: the server's purge job finishes
it within minutes, or any platform admin of the organization finishes it
now with --resume ID. What was dropped already is not dropped again; a
done purge answers that it is done (--list shows done_at).`
	cmd.Flags().StringVar(&before, "before", "", "propose dropping the events created before this time (RFC 3339)")
	cmd.Flags().StringVar(&confirm, "confirm", "", "confirm the proposal with this ID, and drop its range")
	cmd.Flags().StringVar(&resume, "resume", "", "finish the drop of the confirmed purge with this ID")
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
