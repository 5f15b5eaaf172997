package approval_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
)

// An inbox holds exactly the pending approvals its person may answer, as
// MayDecide judges them, newest first, and none past its expiry: not
// another group's, not one they asked for, not one named for someone
// else, not one they approved already. Paged at any size it loses and
// repeats none.
func TestInboxHoldsWhatThePersonMayAnswerNewestFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fin := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "fin",
		Roles: []string{toolplane.RoleApprover, toolplane.GroupRolePrefix + "finance"}}
	admin := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "root",
		Roles: []string{toolplane.RolePlatformAdmin}}

	var all []*toolplane.Approval
	file := func(change func(a *toolplane.Approval)) *toolplane.Approval {
		a := proposal(t)
		a.Key = fmt.Sprintf("key-%d", len(all))
		if change != nil {
			change(a)
		}
		f.file(t, a)
		all = append(all, a)
		f.clock.Advance(time.Second)
		return a
	}
	for i := range 12 {
		file(func(a *toolplane.Approval) { a.ApproverGroup = []string{"", "finance", "ops"}[i%3] })
	}
	own := file(func(a *toolplane.Approval) { a.Invocation = []byte(`{"OrganizationID":"org-1","UserID":"fin"}`) })
	named := file(func(a *toolplane.Approval) { a.Approver = "bob" })
	twice := file(func(a *toolplane.Approval) { a.Approvers, a.ApprovedBy = 2, []string{"fin"} })
	soon := file(func(a *toolplane.Approval) {
		a.ApproverGroup, a.ExpiresAt = "finance", f.clock.Now().Add(30*time.Second)
	})
	f.clock.Advance(time.Minute) // soon is past its expiry, still pending

	want := func(by *toolplane.Credential) []string {
		var ids []string
		for _, a := range slices.Backward(all) {
			if f.clock.Now().Before(a.ExpiresAt) && approval.MayDecide(by, a) == nil {
				ids = append(ids, a.ID)
			}
		}
		return ids
	}
	for _, who := range []*toolplane.Credential{fin, as("alice"), admin} {
		w := want(who)
		if len(w) == 0 {
			t.Fatalf("%s may answer nothing: the test files nothing to judge", who.Subject)
		}
		for _, limit := range []int{1, 3, 100} {
			var got []string
			after := ""
			for page := 0; ; page++ {
				if page > len(all) {
					t.Fatalf("%s: the inbox did not end", who.Subject)
				}
				as, next, err := f.svc.Inbox(t.Context(), after, limit, who)
				if err != nil {
					t.Fatalf("Inbox(%s) = %v", who.Subject, err)
				}
				for _, a := range as {
					got = append(got, a.ID)
				}
				if next == "" {
					break
				}
				after = next
			}
			if !slices.Equal(got, w) {
				t.Errorf("%s's inbox (limit %d) = %v, want %v", who.Subject, limit, got, w)
			}
		}
	}
	for _, a := range []*toolplane.Approval{own, named, twice, soon} {
		if slices.Contains(want(fin), a.ID) {
			t.Errorf("fin may answer %s: the case proves nothing", a.ID)
		}
	}
	if w := want(admin); !slices.Contains(w, all[2].ID) {
		t.Errorf("the platform admin's inbox lacks the ops approval %s: %v", all[2].ID, w)
	}

	// An auditor reads approvals but answers none: no inbox. Another
	// organization's approver has an empty one.
	if _, _, err := f.svc.Inbox(t.Context(), "", 10, as("eve")); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Errorf("Inbox(auditor) = %v; want ErrNotAuthorized", err)
	}
	if as, next, err := f.svc.Inbox(t.Context(), "", 10, as("mallory")); err != nil || len(as) != 0 || next != "" {
		t.Errorf("Inbox(another organization) = %d, %q, %v; want none", len(as), next, err)
	}
}

// The history lists a state's approvals newest first to whoever may read
// approvals, auditors included.
func TestRecentListsNewestFirstToReaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []string
	for i := range 3 {
		a := proposal(t)
		a.Key = fmt.Sprintf("key-%d", i)
		f.file(t, a)
		ids = append(ids, a.ID)
		f.clock.Advance(time.Second)
	}
	slices.Reverse(ids)
	as, next, err := f.svc.Recent(t.Context(), toolplane.ApprovalPending, "", 10, as("eve"))
	if err != nil || next != "" || !slices.Equal(idsOf(as), ids) {
		t.Errorf("Recent = %v, %q, %v; want %v", idsOf(as), next, err, ids)
	}
	agent := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1"}
	if _, _, err := f.svc.Recent(t.Context(), toolplane.ApprovalPending, "", 10, agent); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Errorf("Recent(agent) = %v; want ErrNotAuthorized", err)
	}
}

func idsOf(as []toolplane.Approval) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

// A value the tool's schema marks x-sensitive is hidden from a person
// wherever it appears, though neither its name nor its shape gives it
// away, and the stored approval keeps it.
func TestShownWithHidesTheSchemasSensitiveValues(t *testing.T) {
	t.Parallel()
	a := toolplane.Approval{
		Arguments: []byte(`{"account":"NL91ABNA0417164300","memo":"pay NL91ABNA0417164300","amount":12,"password":"hunter2"}`),
		Preview:   "Pay 12 to NL91ABNA0417164300",
	}
	got := approval.ShownWith(a, []string{"/account"})
	for _, s := range []string{string(got.Arguments), got.Preview} {
		if strings.Contains(s, "NL91ABNA0417164300") || strings.Contains(s, "hunter2") {
			t.Errorf("shown: %s", s)
		}
	}
	if !strings.Contains(string(got.Arguments), `"amount":12`) || !strings.Contains(got.Preview, "Pay 12 to") {
		t.Errorf("shown too little: %s / %s", got.Arguments, got.Preview)
	}
	if !strings.Contains(string(a.Arguments), "NL91ABNA0417164300") {
		t.Error("the stored arguments were changed")
	}
	if plain := approval.ShownWith(a, nil); !strings.Contains(string(plain.Arguments), "NL91ABNA0417164300") || strings.Contains(string(plain.Arguments), "hunter2") {
		t.Errorf("without sensitive pointers it is Shown: %s", plain.Arguments)
	}
}
