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

func testSlackLinkRoundTrip(t *testing.T, s SlackLinkStore) {
	ctx, org := t.Context(), newOrg()
	want := &toolplane.SlackLink{OrganizationID: org, Team: "T01", User: "U01", CredentialID: "tpk_ada",
		Subject: "ada@example.com", Channel: "chn_slack_a", CreatedAt: stored(at(time.Minute))}
	if err := s.PutSlackLink(ctx, want); err != nil {
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
	if err := s.PutSlackLink(ctx, &next); err != nil {
		t.Fatal(err)
	}
	other := &toolplane.SlackLink{OrganizationID: org, Team: "T01", User: "U00", CredentialID: "tpk_bob",
		Subject: "bob@example.com", CreatedAt: stored(at(time.Minute))}
	if err := s.PutSlackLink(ctx, other); err != nil {
		t.Fatal(err)
	}
	ls, err := s.ListSlackLinks(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].User != "U00" || diff(ls[1], next) != "" {
		t.Errorf("ListSlackLinks = %+v, want bob's then ada's replaced link", ls)
	}
	ok, err := s.DeleteSlackLink(ctx, org, "T01", "U01")
	if err != nil || !ok {
		t.Fatalf("DeleteSlackLink = %v, %v; want true", ok, err)
	}
	ok, err = s.DeleteSlackLink(ctx, org, "T01", "U01")
	if err != nil || ok {
		t.Errorf("DeleteSlackLink again = %v, %v; want false", ok, err)
	}
	if _, err := s.GetSlackLink(ctx, org, "T01", "U01"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetSlackLink after delete: %v, want ErrNotFound", err)
	}
}

func testSlackLinkIsolation(t *testing.T, s SlackLinkStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	l := &toolplane.SlackLink{OrganizationID: a, Team: "T01", User: "U01", CredentialID: "tpk_a", Subject: "ada@a.example", CreatedAt: stored(at(0))}
	if err := s.PutSlackLink(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSlackLink(ctx, b, "T01", "U01"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another organization read the link: %v", err)
	}
	if ls, err := s.ListSlackLinks(ctx, b); err != nil || len(ls) != 0 {
		t.Errorf("another organization listed %v, %v", ls, err)
	}
	if ok, err := s.DeleteSlackLink(ctx, b, "T01", "U01"); err != nil || ok {
		t.Errorf("another organization deleted the link: %v, %v", ok, err)
	}
	lb := *l
	lb.OrganizationID, lb.CredentialID, lb.Subject = b, "tpk_b", "eve@b.example"
	if err := s.PutSlackLink(ctx, &lb); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSlackLink(ctx, a, "T01", "U01")
	if err != nil || got.CredentialID != "tpk_a" {
		t.Errorf("organization %s's link after another's put: %+v, %v", a, got, err)
	}
}
