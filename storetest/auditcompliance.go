package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// complianceCases are the audit trail's compliance filters: who, what,
// which approval, which data, and the reports built from them.
var complianceCases = []suiteCase{
	{"Filters", testAuditComplianceFilters},
	{"Isolation", testAuditComplianceIsolation},
}

// complianceTrail appends to org a trail whose events vary in every field
// a compliance filter reads, and answers it in list order.
func complianceTrail(t *testing.T, s toolplane.Store, org string) []toolplane.AuditEvent {
	t.Helper()
	var all []toolplane.AuditEvent
	for i := range 48 {
		e := fullEvent(org, fmt.Sprintf("ev-%02d", i), at(time.Duration(i%7)*time.Second+time.Duration(i%2)*time.Microsecond))
		e.TenantID = []string{"acme", "globex", ""}[i%3]
		e.AgentID = []string{"agent-a", "agent-b"}[i%2]
		e.UserID = []string{"user-ada", "user-bob", "", "user-cy"}[i%4]
		e.PrincipalID = []string{"principal-7", "user-ada"}[i%5/4]
		e.Tool = []string{"crm.read", "payments.refund"}[i%2]
		e.Effect = []toolplane.Effect{toolplane.EffectRead, toolplane.EffectWrite, toolplane.EffectSend}[i%3]
		e.Outcome = []string{"ok", "uncertain", "denied", "approval_required", "ok"}[i%5]
		e.Kind = []toolplane.AuditKind{toolplane.AuditCall, toolplane.AuditCall, toolplane.AuditApproval}[i%3]
		e.ApprovalID = []string{"", "apr-1", "", "apr-2"}[i%4]
		e.ApproverID = []string{"", "user-ada", "person-jane", ""}[i%4]
		e.Destructive = i%6 < 3
		// "pii" in a third, "financial" in another, a class whose name
		// holds pii ("pii-lite") and SQL wildcards in the rest: a match is
		// on a whole class, byte for byte.
		e.Classifications = [][]string{{"pii", "financial"}, {"financial"}, {"pii-lite", "50%_x"}, nil}[i%4]
		appendAudit(t, s, e)
		all = append(all, *e)
	}
	slices.SortFunc(all, compareEvents)
	return all
}

// matches is the contract of AuditFilter's compliance fields, written out
// for one event (the fields testAuditListFilter holds to are left to it).
func matches(f toolplane.AuditFilter, e toolplane.AuditEvent) bool {
	when := stored(e.CreatedAt)
	return (f.TenantID == "" || f.TenantID == e.TenantID) &&
		(f.AgentID == "" || f.AgentID == e.AgentID) &&
		(f.UserID == "" || f.UserID == e.UserID) &&
		(f.Tool == "" || f.Tool == e.Tool) &&
		(f.Effect == "" || f.Effect == e.Effect) &&
		(f.Outcome == "" || f.Outcome == e.Outcome) &&
		(len(f.Outcomes) == 0 || slices.Contains(f.Outcomes, e.Outcome)) &&
		(len(f.Kinds) == 0 || slices.Contains(f.Kinds, e.Kind)) &&
		(f.ApprovalID == "" || f.ApprovalID == e.ApprovalID) &&
		(f.Approved == nil || *f.Approved == (e.ApprovalID != "")) &&
		(f.ApproverID == "" || f.ApproverID == e.ApproverID) &&
		(f.Destructive == nil || *f.Destructive == e.Destructive) &&
		(f.Classification == "" || slices.Contains(e.Classifications, f.Classification)) &&
		(f.Person == "" || f.Person == e.UserID || f.Person == e.ApproverID || f.Person == e.PrincipalID) &&
		(f.Since.IsZero() || !when.Before(stored(f.Since))) && (f.Until.IsZero() || when.Before(stored(f.Until)))
}

func testAuditComplianceFilters(t *testing.T, s toolplane.Store) {
	org := newOrg()
	all := complianceTrail(t, s, org)
	yes, no := true, false
	tests := []struct {
		name   string
		filter toolplane.AuditFilter
		none   bool // the case means to match nothing
	}{
		{"tenant", toolplane.AuditFilter{TenantID: "globex"}, false},
		{"effect", toolplane.AuditFilter{Effect: toolplane.EffectSend}, false},
		{"kind call", toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditCall}}, false},
		{"kind approval", toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditApproval}}, false},
		{"kinds", toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditApproval, toolplane.AuditCall}}, false},
		{"approved", toolplane.AuditFilter{Approved: &yes}, false},
		{"not approved", toolplane.AuditFilter{Approved: &no}, false},
		{"approver", toolplane.AuditFilter{ApproverID: "person-jane"}, false},
		{"destructive", toolplane.AuditFilter{Destructive: &yes}, false},
		{"not destructive", toolplane.AuditFilter{Destructive: &no}, false},
		{"classification", toolplane.AuditFilter{Classification: "pii"}, false},
		{"classification financial", toolplane.AuditFilter{Classification: "financial"}, false},
		{"classification with wildcards", toolplane.AuditFilter{Classification: "50%_x"}, false},
		{"classification a wildcard matches not", toolplane.AuditFilter{Classification: "50%"}, true},
		{"classification in another case", toolplane.AuditFilter{Classification: "PII"}, true},
		{"classification a part of", toolplane.AuditFilter{Classification: "pi"}, true},
		{"person", toolplane.AuditFilter{Person: "user-ada"}, false},
		{"person approver only", toolplane.AuditFilter{Person: "person-jane"}, false},
		{"person nobody", toolplane.AuditFilter{Person: "user-zed"}, true},
		{"destructive without approval that ran", toolplane.AuditFilter{Destructive: &yes, Approved: &no,
			Kinds: []toolplane.AuditKind{toolplane.AuditCall}, Outcomes: []string{"ok", "uncertain"}}, false},
		{"approvals by one person", toolplane.AuditFilter{ApproverID: "user-ada", Since: at(2 * time.Second)}, false},
		{"every new field", toolplane.AuditFilter{TenantID: "acme", Effect: toolplane.EffectRead, Destructive: &yes, Classification: "pii"}, false},
		{"person and tool and time", toolplane.AuditFilter{Person: "user-ada", Tool: "crm.read", Until: at(4 * time.Second)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []toolplane.AuditEvent
			for _, e := range all {
				if matches(tt.filter, e) {
					want = append(want, e)
				}
			}
			if (len(want) == 0) != tt.none {
				t.Fatalf("the case matches %d events: it does not test what it says", len(want))
			}
			// Pages of 3 walk the cursor across the filtered rows.
			wantEvents(t, listAudit(t, s, org, tt.filter, 3), want)
		})
	}
}

// testAuditComplianceIsolation: a compliance filter, however it is set,
// answers the organization's events only, never another's with the same
// fields.
func testAuditComplianceIsolation(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	mine := complianceTrail(t, s, org)
	complianceTrail(t, s, other)
	yes, no := true, false
	for _, f := range []toolplane.AuditFilter{
		{Person: "user-ada"},
		{ApproverID: "person-jane"},
		{Classification: "pii"},
		{Destructive: &yes, Approved: &no},
	} {
		got := listAudit(t, s, org, f, 50)
		var want []toolplane.AuditEvent
		for _, e := range mine {
			if matches(f, e) {
				want = append(want, e)
			}
		}
		for _, e := range got {
			if e.OrganizationID != org {
				t.Fatalf("filter %+v answered an event of %s", f, e.OrganizationID)
			}
		}
		wantEvents(t, got, want)
	}
}
