package approval_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
)

func TestPreviewAmount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		preview string
		cents   int64
		ok      bool
	}{
		{"Refund $1,200.50 to ada", 120050, true},
		{"Refund 12.50 EUR on order ord_1", 1250, true},
		{"Pay € 3 to the vendor", 300, true},
		{"Transfer 7.5 GBP", 750, true},
		{"Pay 40£", 4000, true},
		{"Delete 3 rows of table users", 0, false},
		{"Order ord_12 shipped", 0, false},
		{"", 0, false},
		{"First $5 then $9", 500, true},
		{"Refund 12.90 on order o-390 (arrived broken)", 1290, true},
		{"Refund 1,290.00.", 129000, true},
		{"Upgrade to 1.20.3", 0, false},
		{"Set ratio 0.5", 0, false},
	}
	for _, tt := range tests {
		got, ok := approval.PreviewAmount(tt.preview)
		if got != tt.cents || ok != tt.ok {
			t.Errorf("PreviewAmount(%q) = %d, %v; want %d, %v", tt.preview, got, ok, tt.cents, tt.ok)
		}
	}
}

// An inbox narrowed by amount holds the approvals whose preview names an
// amount within the bounds, newest first, and pages to the end with
// none lost; the store's conditions apply with it, and an approval that
// names no amount is left out once a bound is set.
func TestInboxMatchingAmount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []string
	for i := range 10 {
		a := proposal(t)
		a.Key = fmt.Sprintf("key-%d", i)
		a.Preview = fmt.Sprintf("Refund $%d.00", i*100)
		if i == 9 {
			a.Preview = "Refund everything"
		}
		f.file(t, a)
		ids = append(ids, a.ID)
		f.clock.Advance(time.Second)
	}
	cents := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		f    approval.Filter
		want []int
	}{
		{"no bound", approval.Filter{}, []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
		{"at least 500", approval.Filter{MinCents: cents(50000)}, []int{8, 7, 6, 5}},
		{"at most 200", approval.Filter{MaxCents: cents(20000)}, []int{2, 1, 0}},
		{"between", approval.Filter{MinCents: cents(30000), MaxCents: cents(40000)}, []int{4, 3}},
		{"with words", approval.Filter{ApprovalFilter: toolplane.ApprovalFilter{Text: "$7"}, MinCents: cents(100)}, []int{7}},
	}
	for _, tt := range tests {
		var want []string
		for _, i := range tt.want {
			want = append(want, ids[i])
		}
		for _, limit := range []int{1, 2, 50} {
			var got []string
			after := ""
			for page := 0; page < 100; page++ {
				as, next, err := f.svc.InboxMatching(t.Context(), tt.f, after, limit, as("alice"))
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				for _, a := range as {
					got = append(got, a.ID)
				}
				if after = next; next == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (limit %d) = %v; want %v", tt.name, limit, got, want)
			}
		}
	}
}

// An inbox narrowed by agent holds the approvals of that agent alone:
// the principal that asked, or the agent its stored invocation names. A
// name written inside the invocation's attribute maps (a token's claims,
// a person's attributes) is not the agent, whatever bytes it shares.
func TestInboxMatchingAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	file := func(key, principal, invocation string) string {
		a := proposal(t)
		a.Key, a.PrincipalID, a.Invocation = key, principal, []byte(invocation)
		f.file(t, a)
		f.clock.Advance(time.Second)
		return a.ID
	}
	asked := file("key-asked", "agent-a", `{"OrganizationID":"org-1","AgentID":"agent-a"}`)
	onBehalf := file("key-behalf", "person-p", `{"OrganizationID":"org-1","AgentID":"agent-a"}`)
	file("key-claims", "agent-b", `{"OrganizationID":"org-1","AgentID":"agent-b","AgentAttributes":{"AgentID":"agent-a"}}`)
	file("key-user", "agent-c", `{"OrganizationID":"org-1","AgentID":"agent-c","User":{"Attributes":{"x":{"AgentID":"agent-a"}}}}`)
	as, _, err := f.svc.InboxMatching(t.Context(), approval.Filter{ApprovalFilter: toolplane.ApprovalFilter{Agent: "agent-a"}}, "", 50, as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range as {
		got = append(got, a.ID)
	}
	if want := []string{onBehalf, asked}; !slices.Equal(got, want) {
		t.Errorf("agent-a's approvals = %v, want %v (and none whose claims merely name agent-a)", got, want)
	}
}
