package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// SlackLinkStore is what RunSlackLinks needs of a backend.
type SlackLinkStore interface {
	toolplane.Store
	toolplane.SlackLinkStore
}

// RunSlackLinks runs the Slack link storage checks as subtests of t,
// named SlackLinks/Check, each on a store newStore answers. The contract,
// beyond toolplane.SlackLinkStore's comments: a link is one row per
// organization, team and user; putting it again replaces who it names;
// another organization's link of the same team and user is another row
// that no read or delete reaches across.
func RunSlackLinks(t *testing.T, newStore func(t *testing.T) SlackLinkStore) {
	t.Helper()
	t.Run("SlackLinks", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name string
			run  func(t *testing.T, s SlackLinkStore)
		}{
			{"RoundTripAndReplace", testSlackLinkRoundTrip},
			{"Isolation", testSlackLinkIsolation},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

// slackEvent answers the audit event of a link's change in org.
func slackEvent(org, outcome string) *toolplane.AuditEvent {
	by := &toolplane.Credential{ID: "tpk_ada", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "ada@example.com"}
	return toolplane.ControlEvent(by, toolplane.AuditSlack, outcome, "T01/U01", stored(at(time.Minute)))
}

// slackEvents answers the outcomes of org's Slack link events, newest
// first.
func slackEvents(t *testing.T, s SlackLinkStore, org string) []string {
	t.Helper()
	evs, _, err := s.ListAudit(t.Context(), org, toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditSlack}}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Outcome)
	}
	return out
}

func testSlackLinkRoundTrip(t *testing.T, s SlackLinkStore) {
	ctx, org := t.Context(), newOrg()
	want := &toolplane.SlackLink{OrganizationID: org, Team: "T01", User: "U01", CredentialID: "tpk_ada",
		Subject: "ada@example.com", Channel: "chn_slack_a", CreatedAt: stored(at(time.Minute))}
	if err := s.PutSlackLink(ctx, want, slackEvent(org, "linked")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSlackLink(ctx, org, "T01", "U01")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetSlackLink: %s", d)
	}
	if _, err := s.GetSlackLink(ctx, org, "T01", "U02"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetSlackLink of another user: %v, want ErrNotFound", err)
	}
	if _, err := s.GetSlackLink(ctx, org, "T02", "U01"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetSlackLink of the user in another team: %v, want ErrNotFound", err)
	}
	next := *want
	next.CredentialID, next.Subject, next.Channel, next.CreatedAt = "tpk_ada2", "ada@example.com", "chn_slack_b", stored(at(2*time.Minute))
	if err := s.PutSlackLink(ctx, &next, slackEvent(org, "linked")); err != nil {
		t.Fatal(err)
	}
	other := &toolplane.SlackLink{OrganizationID: org, Team: "T01", User: "U00", CredentialID: "tpk_bob",
		Subject: "bob@example.com", CreatedAt: stored(at(time.Minute))}
	if err := s.PutSlackLink(ctx, other, slackEvent(org, "linked")); err != nil {
		t.Fatal(err)
	}
	ls, err := s.ListSlackLinks(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].User != "U00" || diff(ls[1], next) != "" {
		t.Errorf("ListSlackLinks = %+v, want bob's then ada's replaced link", ls)
	}
	ok, err := s.DeleteSlackLink(ctx, org, "T01", "U01", slackEvent(org, "unlinked"))
	if err != nil || !ok {
		t.Fatalf("DeleteSlackLink = %v, %v; want true", ok, err)
	}
	ok, err = s.DeleteSlackLink(ctx, org, "T01", "U01", slackEvent(org, "unlinked"))
	if err != nil || ok {
		t.Errorf("DeleteSlackLink again = %v, %v; want false", ok, err)
	}
	if _, err := s.GetSlackLink(ctx, org, "T01", "U01"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetSlackLink after delete: %v, want ErrNotFound", err)
	}
	// Every change is in the trail with its link, and a delete that
	// removed nothing records nothing.
	if got := slackEvents(t, s, org); len(got) != 4 || got[0] != "unlinked" || got[1] != "linked" {
		t.Errorf("the trail's Slack link events, newest first: %v; want one unlinked and three linked", got)
	}
}

func testSlackLinkIsolation(t *testing.T, s SlackLinkStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	l := &toolplane.SlackLink{OrganizationID: a, Team: "T01", User: "U01", CredentialID: "tpk_a", Subject: "ada@a.example", CreatedAt: stored(at(0))}
	if err := s.PutSlackLink(ctx, l, slackEvent(a, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSlackLink(ctx, b, "T01", "U01"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another organization read the link: %v", err)
	}
	if ls, err := s.ListSlackLinks(ctx, b); err != nil || len(ls) != 0 {
		t.Errorf("another organization listed %v, %v", ls, err)
	}
	if ok, err := s.DeleteSlackLink(ctx, b, "T01", "U01", slackEvent(b, "unlinked")); err != nil || ok {
		t.Errorf("another organization deleted the link: %v, %v", ok, err)
	}
	lb := *l
	lb.OrganizationID, lb.CredentialID, lb.Subject = b, "tpk_b", "eve@b.example"
	if err := s.PutSlackLink(ctx, &lb, slackEvent(b, "linked")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSlackLink(ctx, a, "T01", "U01")
	if err != nil || got.CredentialID != "tpk_a" {
		t.Errorf("organization %s's link after another's put: %+v, %v", a, got, err)
	}
}
