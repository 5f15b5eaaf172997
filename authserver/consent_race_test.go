package authserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
)

// racing is a node's store whose first consent insert for a client lets
// that client's hook run first: another node's admin, or the sweep,
// acting between the consent's checks of the client and the insert of
// the grant.
type racing struct {
	authserver.Store
	hooks *sync.Map // client ID: func() run once before its first consent is stored
}

func (r racing) InsertOAuthConsent(ctx context.Context, g *toolplane.OAuthGrant, c *toolplane.OAuthCode, e *toolplane.AuditEvent) error {
	if h, ok := r.hooks.LoadAndDelete(g.ClientID); ok {
		h.(func())()
	}
	return r.Store.InsertOAuthConsent(ctx, g, c, e)
}

// TestConsentRacingClientRevocation: a client revoked while a person's
// consent to it is being stored (after the consent page checked it)
// leaves no consent standing: the consent is refused to the client, and
// the revocation answers none revoked.
func TestConsentRacingClientRevocation(t *testing.T) {
	hooks := &sync.Map{}
	forEach(t, func(c *authserver.Config) {
		c.Store = racing{Store: c.Store, hooks: hooks}
	}, func(t *testing.T, w *world) {
		c := w.newClient()
		hooks.Store(c.conf.ClientID, func() {
			if n, err := w.nodes[1].as.RevokeClient(context.Background(), admin, c.conf.ClientID); err != nil || n != 0 {
				t.Errorf("revoke client: %d %v, want none revoked", n, err)
			}
		})
		b := w.browser()
		u := b.decide(b.consent(c.authURL()), "allow", nil)
		if q := u.Query(); q.Get("code") != "" || q.Get("error") != "access_denied" {
			t.Fatalf("a consent stored after its client's revocation sent the browser to %s, want access_denied", u)
		}
		gs, err := w.nodes[0].store.OAuthGrants(t.Context(), org, "")
		if err != nil || len(gs) != 0 {
			t.Fatalf("consents after the race: %v %+v, want none", err, gs)
		}
	})
}

// TestConsentRacingSweep: the sweep of unused clients removing a client
// while a person's first consent to it is being stored leaves no consent
// to a client no admin can list: the consent is refused.
func TestConsentRacingSweep(t *testing.T) {
	hooks := &sync.Map{}
	forEach(t, func(c *authserver.Config) {
		c.Store = racing{Store: c.Store, hooks: hooks}
	}, func(t *testing.T, w *world) {
		c := w.newClient()
		hooks.Store(c.conf.ClientID, func() {
			// The sweep on another node, a week after the registration.
			if n, err := w.nodes[1].store.DeleteUnusedOAuthClients(context.Background(), time.Now().Add(8*24*time.Hour), 1000); err != nil || n != 1 {
				t.Errorf("sweep: %d %v, want the client removed", n, err)
			}
		})
		b := w.browser()
		u := b.decide(b.consent(c.authURL()), "allow", nil)
		if q := u.Query(); q.Get("code") != "" || q.Get("error") != "access_denied" {
			t.Fatalf("a consent stored after the sweep removed its client sent the browser to %s, want access_denied", u)
		}
		gs, err := w.nodes[0].store.OAuthGrants(t.Context(), org, "")
		if err != nil || len(gs) != 0 {
			t.Fatalf("consents after the race: %v %+v, want none", err, gs)
		}
	})
}

// TestRevokeClientGone: a client whose registration is gone (a consent
// stored before consents checked their client) is revoked all the same
// while a consent of the organization names it; one nobody knows of is
// not found.
func TestRevokeClientGone(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		ctx := t.Context()
		g := &toolplane.OAuthGrant{OrganizationID: org, ID: toolplane.NewID("oag_"), ClientID: "tpc_gone", Subject: "alice", AgentID: "oauth-clients",
			Resource: w.base + "/mcp", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), SignedInAt: time.Now()}
		if err := w.nodes[0].store.InsertOAuthGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		n, err := w.nodes[1].as.RevokeClient(ctx, admin, g.ClientID)
		if err != nil || n != 1 {
			t.Fatalf("revoke a client whose registration is gone: %d %v, want its consent revoked", n, err)
		}
		if got, err := w.nodes[0].store.GetOAuthGrant(ctx, org, g.ID); err != nil || got.RevokedReason != toolplane.OAuthRevokedClientOff {
			t.Fatalf("the gone client's consent: %v %+v, want revoked", err, got)
		}
		if _, err := w.nodes[1].as.RevokeClient(ctx, admin, "tpc_nobody"); !errors.Is(err, toolplane.ErrNotFound) {
			t.Fatalf("revoking a client nobody knows of: %v, want ErrNotFound", err)
		}
	})
}

// TestTokenEndpointRefusesRevokedClient: a consent standing for a client
// its organization revoked (a state no revocation leaves, checked all the
// same) gets no tokens: neither its code nor its refresh token is
// honoured.
func TestTokenEndpointRefusesRevokedClient(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		ctx := t.Context()
		refreshed, coded := w.newClient(), w.newClient()
		tok, err := refreshed.exchange(0, refreshed.authorize(w.browser(), nil))
		if err != nil {
			t.Fatal(err)
		}
		code := coded.authorize(w.browser(), nil)
		for _, c := range []*client{refreshed, coded} {
			// The setting alone, as a store written before a client's
			// revocation was one transaction could hold it.
			if err := w.nodes[0].store.PutOAuthClientSetting(ctx, &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: c.conf.ClientID,
				RevokedAt: time.Now(), UpdatedBy: "admin", UpdatedAt: time.Now()}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := coded.exchange(1, code); oauthErr(err) != "invalid_grant" {
			t.Fatalf("a revoked client's code: %v, want invalid_grant", err)
		}
		if _, err := refreshed.refresh(1, tok.RefreshToken); oauthErr(err) != "invalid_grant" {
			t.Fatalf("a revoked client's refresh token: %v, want invalid_grant", err)
		}
	})
}

// TestRevokeDocumentClientAhead: an admin revokes a metadata document's
// client before anyone of the organization consented to it (its row is
// stored only by a consent); a person's consent to it is then refused.
func TestRevokeDocumentClientAhead(t *testing.T) {
	docs := documentServer(t)
	forEach(t, func(c *authserver.Config) {
		c.Egress, c.DocumentTimeout, c.DocumentMaxBytes = loopbackEgress(t, docs), 2*time.Second, 64<<10
	}, func(t *testing.T, w *world) {
		c := w.clientOf(docs.URL + "/good")
		if n, err := w.nodes[1].as.RevokeClient(t.Context(), admin, c.conf.ClientID); err != nil || n != 0 {
			t.Fatalf("revoke a document client nobody consented to: %d %v", n, err)
		}
		b := w.browser()
		p := b.consent(c.authURL())
		if q := p.location; p.status == http.StatusOK && strings.Contains(p.body, `value="allow"`) {
			u := b.decide(p, "allow", nil)
			if u.Query().Get("error") != "access_denied" {
				t.Fatalf("a consent to a document client revoked ahead sent the browser to %s", u)
			}
		} else if !strings.Contains(q, "error=access_denied") {
			t.Fatalf("the authorization of a document client revoked ahead: %d %q %s", p.status, q, p.body)
		}
		if gs, err := w.nodes[0].store.OAuthGrants(t.Context(), org, ""); err != nil || len(gs) != 0 {
			t.Fatalf("consents: %v %+v, want none", err, gs)
		}
	})
}
