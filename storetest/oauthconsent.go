package storetest

import (
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// newOAuthClientAt stores a registered client created at created.
func newOAuthClientAt(t *testing.T, s OAuthStore, created time.Time) *toolplane.OAuthClient {
	t.Helper()
	c := &toolplane.OAuthClient{ID: "tpc_" + rand.Text(), Name: "c", RedirectURIs: []string{"http://127.0.0.1/cb"},
		Source: toolplane.OAuthClientRegistered, CreatedAt: created}
	if err := s.InsertOAuthClient(t.Context(), c, 0); err != nil {
		t.Fatal(err)
	}
	return c
}

// newOAuthConsent answers a grant of org's subject to clientID and its code.
func newOAuthConsent(org, clientID, subject string) (*toolplane.OAuthGrant, *toolplane.OAuthCode) {
	g := newOAuthGrant(org, subject, 0)
	g.ClientID = clientID
	return g, &toolplane.OAuthCode{Hash: rand.Text(), OrganizationID: org, GrantID: g.ID, ClientID: clientID,
		RedirectURI: "http://127.0.0.1/cb", Challenge: "chal", ExpiresAt: at(time.Minute)}
}

func testOAuthConsentChecksClient(t *testing.T, s OAuthStore) {
	ctx, org, other := t.Context(), newOrg(), newOrg()
	// A client nobody registered: nothing stored.
	g, c := newOAuthConsent(org, "tpc_"+rand.Text(), "alice")
	if err := s.InsertOAuthConsent(ctx, g, c, nil); !errors.Is(err, toolplane.ErrOAuthClientGone) || !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("a consent to an unregistered client: %v, want ErrOAuthClientGone", err)
	}
	if _, err := s.GetOAuthGrant(ctx, org, g.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("the refused consent's grant: %v, want none", err)
	}
	if _, err := s.TakeOAuthCode(ctx, c.Hash, at(time.Second)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("the refused consent's code: %v, want none", err)
	}

	client := newOAuthClientAt(t, s, at(0))
	mine, c := newOAuthConsent(org, client.ID, "alice")
	if err := s.InsertOAuthConsent(ctx, mine, c, nil); err != nil {
		t.Fatalf("a consent to a registered client: %v", err)
	}
	if got, err := s.TakeOAuthCode(ctx, c.Hash, at(time.Second)); err != nil || got.GrantID != mine.ID {
		t.Fatalf("its code: %v %+v", err, got)
	}
	if err := s.InsertOAuthConsent(ctx, mine, c, nil); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("the same consent again: %v, want ErrExists", err)
	}
	theirs, c := newOAuthConsent(other, client.ID, "bob")
	if err := s.InsertOAuthConsent(ctx, theirs, c, nil); err != nil {
		t.Fatal(err)
	}

	if _, err := s.RevokeOAuthClient(ctx, &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: client.ID, UpdatedAt: at(time.Hour)}, toolplane.OAuthRevokedClientOff, nil); !errors.Is(err, toolplane.ErrInvalid) {
		t.Fatalf("a revocation without its time: %v, want ErrInvalid", err)
	}
	set := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: client.ID, AgentID: "agent-b", RevokedAt: at(time.Hour), UpdatedBy: "admin", UpdatedAt: at(time.Hour)}
	if n, err := s.RevokeOAuthClient(ctx, set, toolplane.OAuthRevokedClientOff, nil); n != 1 || err != nil {
		t.Fatalf("revoke the client: %d %v, want the organization's one consent", n, err)
	}
	if got, err := s.GetOAuthClientSetting(ctx, org, client.ID); err != nil || !got.RevokedAt.Equal(stored(at(time.Hour))) || got.AgentID != "agent-b" || got.UpdatedBy != "admin" {
		t.Fatalf("the revocation's setting: %v %+v", err, got)
	}
	if got, err := s.GetOAuthGrant(ctx, org, mine.ID); err != nil || !got.RevokedAt.Equal(stored(at(time.Hour))) || got.RevokedReason != toolplane.OAuthRevokedClientOff {
		t.Fatalf("the organization's consent: %v %+v, want revoked", err, got)
	}
	if got, err := s.GetOAuthGrant(ctx, other, theirs.ID); err != nil || !got.RevokedAt.IsZero() {
		t.Fatalf("another organization's consent: %v %+v, want standing", err, got)
	}
	again, c := newOAuthConsent(org, client.ID, "carol")
	if err := s.InsertOAuthConsent(ctx, again, c, nil); !errors.Is(err, toolplane.ErrOAuthClientGone) {
		t.Fatalf("a consent to a revoked client: %v, want ErrOAuthClientGone", err)
	}
	if _, err := s.GetOAuthGrant(ctx, org, again.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("the refused consent's grant: %v, want none", err)
	}
	theirs2, c := newOAuthConsent(other, client.ID, "dave")
	if err := s.InsertOAuthConsent(ctx, theirs2, c, nil); err != nil {
		t.Fatalf("another organization's consent to the client: %v", err)
	}

	// A client whose registration is gone is revoked all the same.
	gone := newOAuthGrant(org, "erin", 0)
	gone.ClientID = "tpc_" + rand.Text()
	if err := s.InsertOAuthGrant(ctx, gone); err != nil {
		t.Fatal(err)
	}
	set = &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: gone.ClientID, RevokedAt: at(time.Hour), UpdatedBy: "admin", UpdatedAt: at(time.Hour)}
	if n, err := s.RevokeOAuthClient(ctx, set, toolplane.OAuthRevokedClientOff, nil); n != 1 || err != nil {
		t.Fatalf("revoke a client whose registration is gone: %d %v, want its consent", n, err)
	}
}

// testOAuthConsentRacesRevocation: of consents stored while the client is
// revoked, each is refused or revoked by the revocation: none stands.
func testOAuthConsentRacesRevocation(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	client := newOAuthClientAt(t, s, at(0))
	const consents = 16
	var (
		wg      sync.WaitGroup
		stored  = make(chan string, consents)
		revoked int
	)
	start := make(chan struct{})
	for i := range consents {
		wg.Go(func() {
			<-start
			g, c := newOAuthConsent(org, client.ID, "p"+string(rune('a'+i)))
			switch err := s.InsertOAuthConsent(ctx, g, c, nil); {
			case err == nil:
				stored <- g.ID
			case !errors.Is(err, toolplane.ErrOAuthClientGone):
				t.Errorf("consent %d: %v", i, err)
			}
		})
	}
	wg.Go(func() {
		<-start
		set := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: client.ID, RevokedAt: at(time.Hour), UpdatedBy: "admin", UpdatedAt: at(time.Hour)}
		n, err := s.RevokeOAuthClient(ctx, set, toolplane.OAuthRevokedClientOff, nil)
		if err != nil {
			t.Errorf("revoke: %v", err)
		}
		revoked = n
	})
	close(start)
	wg.Wait()
	close(stored)
	n := 0
	for id := range stored {
		n++
		if g, err := s.GetOAuthGrant(ctx, org, id); err != nil || g.RevokedAt.IsZero() {
			t.Errorf("consent %s stored beside the client's revocation: %v %+v, want revoked", id, err, g)
		}
	}
	if revoked != n {
		t.Errorf("the revocation revoked %d consents, %d were stored", revoked, n)
	}
}

// testOAuthConsentRacesSweep: of consents stored while the sweep of
// unused clients runs, each keeps its client, or is refused and its
// client removed.
func testOAuthConsentRacesSweep(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	const consents = 16
	clients := make([]*toolplane.OAuthClient, consents)
	for i := range clients {
		clients[i] = newOAuthClientAt(t, s, at(-30*24*time.Hour))
	}
	var (
		wg    sync.WaitGroup
		swept int
		mu    sync.Mutex
		ok    = map[string]bool{}
	)
	start := make(chan struct{})
	for i, cl := range clients {
		wg.Go(func() {
			<-start
			g, c := newOAuthConsent(org, cl.ID, "p"+string(rune('a'+i)))
			switch err := s.InsertOAuthConsent(ctx, g, c, nil); {
			case err == nil:
				mu.Lock()
				ok[cl.ID] = true
				mu.Unlock()
			case !errors.Is(err, toolplane.ErrOAuthClientGone):
				t.Errorf("consent %d: %v", i, err)
			}
		})
	}
	wg.Go(func() {
		<-start
		n, err := s.DeleteUnusedOAuthClients(ctx, at(0), 1000)
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		swept = n
	})
	close(start)
	wg.Wait()
	for _, cl := range clients {
		_, err := s.GetOAuthClient(ctx, cl.ID)
		switch {
		case ok[cl.ID] && err != nil:
			t.Errorf("client %s of a stored consent: %v, want kept", cl.ID, err)
		case !ok[cl.ID] && !errors.Is(err, toolplane.ErrNotFound):
			t.Errorf("client %s of a refused consent: %v, want swept", cl.ID, err)
		}
	}
	if swept+len(ok) != consents {
		t.Errorf("swept %d, consents stored %d, of %d", swept, len(ok), consents)
	}
}
