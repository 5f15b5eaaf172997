package cli

import (
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// auditFlags are the compliance filters of `audit list`.
type auditFlags struct {
	user, person, tenant, effect, approval, approver, class, approved, destructive, since, until string
	kinds                                                                                        []string
}

func (f *auditFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.user, "user", "", "only calls made for this person")
	fl.StringVar(&f.person, "person", "", "only events about this person: acted for, approved by, or made by")
	fl.StringVar(&f.tenant, "tenant", "", "only this tenant's events")
	fl.StringVar(&f.effect, "effect", "", "only calls of tools of this effect (read, write, send)")
	fl.StringArrayVar(&f.kinds, "kind", nil, "only events of this kind: call, approval, reconciliation, key, grant, policy (repeatable)")
	fl.StringVar(&f.approval, "approval", "", "only events naming this approval")
	fl.StringVar(&f.approved, "approved", "", "true: only events naming an approval; false: only those naming none")
	fl.StringVar(&f.approver, "approver", "", "only events of approvals this person decided")
	fl.StringVar(&f.class, "classification", "", "only calls that touched a field of this data class (pii, financial)")
	fl.StringVar(&f.destructive, "destructive", "", "true: only calls of destructive tools; false: only the others")
	fl.StringVar(&f.since, "since", "", "only events at or after this time (RFC 3339)")
	fl.StringVar(&f.until, "until", "", "only events before this time (RFC 3339)")
}

func (f *auditFlags) query() []string {
	return []string{"user_id", f.user, "person", f.person, "tenant_id", f.tenant, "effect", f.effect, "approval_id", f.approval,
		"approved", f.approved, "approver_id", f.approver, "classification", f.class, "destructive", f.destructive,
		"since", f.since, "until", f.until}
}

// sep answers the separator before one more query parameter of path.
func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

func newAuditReportCmd(a *app) *cobra.Command {
	var class, person, since, until string
	var page func() []string
	cmd := apiCmd(a, "report NAME", `run a compliance report (auditor): destructive-without-approval,
classification --class CLASS, approvals-by --person ID`, exactArgs(1, "NAME"), auditColumns,
		func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/audit/reports/" + esc(args[0]) +
				query(append([]string{"class", class, "person", person, "since", since, "until", until}, page()...)...)}, nil
		})
	page = paging(cmd)
	cmd.Flags().StringVar(&class, "class", "", "the data class of the classification report (pii)")
	cmd.Flags().StringVar(&person, "person", "", "the approver of the approvals-by report")
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time (RFC 3339)")
	cmd.Flags().StringVar(&until, "until", "", "only events before this time (RFC 3339)")
	return cmd
}

func newExportSubjectCmd(a *app) *cobra.Command {
	var since, until string
	cmd := &cobra.Command{Use: "export-subject PERSON", Args: exactArgs(1, "PERSON"),
		Short: "write every audit event about one person as JSON Lines, for a data-subject request (auditor)"}
	r := addRemote(a, cmd)
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time (RFC 3339)")
	cmd.Flags().StringVar(&until, "until", "", "only events before this time (RFC 3339)")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		for _, v := range []string{since, until} {
			if v != "" {
				if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
					return usageErr("--since and --until are times in RFC 3339, such as 2026-07-01T08:00:00Z")
				}
			}
		}
		t, err := r.resolve(cmd)
		if err != nil {
			return err
		}
		return t.stream(cmd.Context(), "/v1/audit/subjects/"+url.PathEscape(args[0])+"/export"+query("since", since, "until", until), a.stdout)
	})
	return cmd
}
