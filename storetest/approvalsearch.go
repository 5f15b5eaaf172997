package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// testApprovalSearch: SearchApprovals answers, newest first and paged
// without loss or repeat, exactly the approvals of the organization, the
// state and the groups asked that the filter matches: a tool and a group
// by name, an agent by its principal or the agent its invocation names
// (quotes and all), a time window, and words in the tool, preview, ID,
// run or principal with ASCII case folded. Another organization's
// approvals with the same IDs are never answered.
func testApprovalSearch(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	tools := []string{"payments.refund_order", "mail.send", "Crm.Update"}
	agents := []string{"agent-billing", "agent-mail", `agent "quoted"`, ""}
	groups := []string{"", "finance"}
	const n = 24
	var all []toolplane.Approval
	for _, i := range shuffled(n) {
		for _, o := range []string{org, other} {
			a := fullApproval(o, fmt.Sprintf("apr-s-%03d", i), fmt.Sprintf("run-%d", i%5), fmt.Sprintf("k%d", i), at(time.Duration(i)*time.Minute))
			a.Tool = tools[i%3]
			a.PrincipalID = fmt.Sprintf("key-%d", i%2)
			a.ApproverGroup = groups[(i/2)%2]
			a.Preview = fmt.Sprintf("Refund %d EUR on order ORD_%d", i*10, i)
			inv, err := json.Marshal(toolplane.Invocation{OrganizationID: o, AgentID: agents[i%4], RunID: a.RunID})
			if err != nil {
				t.Fatal(err)
			}
			a.Invocation = inv
			if i == 23 {
				a.Status = toolplane.ApprovalApproved
			}
			if o == other {
				// The same IDs and words in another organization.
				a.Preview += " (other)"
				insertApproval(t, s, a)
				continue
			}
			insertApproval(t, s, a)
			all = append(all, *a)
		}
	}
	slices.SortFunc(all, func(a, b toolplane.Approval) int { return compareApprovals(b, a) })
	// where answers the pending approvals whose index keep holds, newest
	// first: the expectations are said by how the rows were made, not by
	// the filter's rule.
	where := func(keep func(i int) bool) []toolplane.Approval {
		var out []toolplane.Approval
		for _, a := range all {
			var i int
			if _, err := fmt.Sscanf(a.ID, "apr-s-%03d", &i); err != nil {
				t.Fatal(err)
			}
			if a.Status == toolplane.ApprovalPending && keep(i) {
				out = append(out, a)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		groups []string
		f      toolplane.ApprovalFilter
		want   []toolplane.Approval
	}{
		{"no condition", nil, toolplane.ApprovalFilter{}, where(func(int) bool { return true })},
		{"a tool", nil, toolplane.ApprovalFilter{Tool: "mail.send"}, where(func(i int) bool { return i%3 == 1 })},
		{"a tool's prefix is not the tool", nil, toolplane.ApprovalFilter{Tool: "mail"}, nil},
		{"an agent its invocation names", nil, toolplane.ApprovalFilter{Agent: "agent-mail"}, where(func(i int) bool { return i%4 == 1 })},
		{"an agent with quotes", nil, toolplane.ApprovalFilter{Agent: `agent "quoted"`}, where(func(i int) bool { return i%4 == 2 })},
		{"an agent's prefix is not the agent", nil, toolplane.ApprovalFilter{Agent: "agent"}, nil},
		{"a principal", nil, toolplane.ApprovalFilter{Agent: "key-1"}, where(func(i int) bool { return i%2 == 1 })},
		{"a group", nil, toolplane.ApprovalFilter{Group: "finance"}, where(func(i int) bool { return (i/2)%2 == 1 })},
		{"a group within the groups asked", []string{""}, toolplane.ApprovalFilter{Group: "finance"}, nil},
		{"filed since", nil, toolplane.ApprovalFilter{Since: at(10 * time.Minute)}, where(func(i int) bool { return i >= 10 })},
		{"filed before", nil, toolplane.ApprovalFilter{Before: at(5 * time.Minute)}, where(func(i int) bool { return i < 5 })},
		{"a window", nil, toolplane.ApprovalFilter{Since: at(5 * time.Minute), Before: at(10 * time.Minute)}, where(func(i int) bool { return i >= 5 && i < 10 })},
		{"words in the preview, case folded", nil, toolplane.ApprovalFilter{Text: "ord_1"}, where(func(i int) bool { return i == 1 || (i >= 10 && i < 20) })},
		{"words in the tool", nil, toolplane.ApprovalFilter{Text: "CRM"}, where(func(i int) bool { return i%3 == 2 })},
		{"an ID", nil, toolplane.ApprovalFilter{Text: "apr-s-007"}, where(func(i int) bool { return i == 7 })},
		{"a run", nil, toolplane.ApprovalFilter{Text: "run-3"}, where(func(i int) bool { return i%5 == 3 })},
		{"words nothing holds", nil, toolplane.ApprovalFilter{Text: "zzz"}, nil},
		{"the other organization's words", nil, toolplane.ApprovalFilter{Text: "(other)"}, nil},
		{"every condition with groups", []string{"", "finance"}, toolplane.ApprovalFilter{Tool: "payments.refund_order", Group: "finance", Agent: "key-0", Since: at(2 * time.Minute), Text: "refund"},
			where(func(i int) bool { return i%3 == 0 && (i/2)%2 == 1 && i%2 == 0 && i >= 2 })},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 3, maxLimit} {
			got := pageAll(t, "SearchApprovals", limit, nil, func(after string) ([]toolplane.Approval, string, error) {
				return s.SearchApprovals(t.Context(), org, toolplane.ApprovalPending, tt.groups, tt.f, after, limit)
			})
			if len(got) != len(tt.want) {
				t.Fatalf("%s (limit %d): %v, want %v", tt.name, limit, idsOf(got), idsOf(tt.want))
			}
			for i := range got {
				if d := diff(got[i], tt.want[i]); d != "" {
					t.Errorf("%s (limit %d) row %d (%s): %s", tt.name, limit, i, tt.want[i].ID, d)
				}
			}
		}
	}
	approved, _, err := s.SearchApprovals(t.Context(), org, toolplane.ApprovalApproved, nil, toolplane.ApprovalFilter{Text: "ord_23"}, "", 10)
	if err != nil || len(approved) != 1 || approved[0].ID != "apr-s-023" || strings.Contains(approved[0].Preview, "other") {
		t.Errorf("SearchApprovals(approved) = %v, %v; want apr-s-023 of the organization", idsOf(approved), err)
	}
	if _, _, err := s.SearchApprovals(t.Context(), org, toolplane.ApprovalPending, nil, toolplane.ApprovalFilter{Text: strings.Repeat("x", toolplane.MaxApprovalFilterText+1)}, "", 10); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("SearchApprovals(a long search) = %v; want ErrInvalid", err)
	}
}
