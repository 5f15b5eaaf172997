package authserver_test

import (
	"errors"
	"github.com/toolplane/toolplane/authserver"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
)

// A grant given by a person signed in with their key follows the key as
// it is now: roles taken from the key are gone from the next call, and a
// revoked key leaves the grant acting for nobody, the token in hand and
// a refreshed one alike.
func TestGrantFollowsThePersonsKey(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		tok, err := c.exchange(0, c.authorize(w.browser(), nil))
		if err != nil {
			t.Fatal(err)
		}
		id, _, err := apikey.Parse(w.key)
		if err != nil {
			t.Fatal(err)
		}
		st := w.nodes[0].store
		cred, err := st.GetCredential(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		before, status := w.call(0, "/mcp", tok.AccessToken)
		if status != http.StatusOK || !slices.Equal(before.Roles, cred.Roles) {
			t.Fatalf("before: %d %+v; want the key's roles %v", status, before, cred.Roles)
		}
		cred.Roles = []string{toolplane.RoleAuditor}
		if ok, err := st.UpdateCredential(t.Context(), cred); !ok || err != nil {
			t.Fatalf("change the key's roles: %v %v", ok, err)
		}
		cred, _ = st.GetCredential(t.Context(), id)
		after, status := w.call(1, "/mcp", tok.AccessToken)
		if status != http.StatusOK || !slices.Equal(after.Roles, []string{toolplane.RoleAuditor}) {
			t.Fatalf("after the roles changed: %d %+v; want only auditor", status, after)
		}
		cred.RevokedAt = time.Now()
		if ok, err := st.UpdateCredential(t.Context(), cred); !ok || err != nil {
			t.Fatalf("revoke the key: %v %v", ok, err)
		}
		if got, status := w.call(1, "/mcp", tok.AccessToken); status == http.StatusOK {
			t.Fatalf("the key is revoked, yet its grant's token acts for %s with %v", got.ActsFor, got.Roles)
		}
		if next, err := c.refresh(0, tok.RefreshToken); err == nil {
			if got, status := w.call(0, "/mcp", next.AccessToken); status == http.StatusOK {
				t.Fatalf("the key is revoked, yet a refreshed token acts for %s with %v", got.ActsFor, got.Roles)
			}
		}
	})
}

// A refused authorization request is not sent back to a client's
// redirect URI before the person signs in here: anyone may register a
// client naming any address, and the server would otherwise redirect
// whoever follows a link there (RFC 9700 §4.11.2).
func TestNoRedirectBeforeSignIn(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		id, status := w.register(0, "https://elsewhere.example/landing")
		if status != http.StatusCreated {
			t.Fatalf("register: %d", status)
		}
		for _, query := range []string{"&response_type=token", "&response_type=code", "&response_type=code&code_challenge_method=plain&code_challenge=x"} {
			p := w.browser().get(w.base + "/oauth/authorize?client_id=" + url.QueryEscape(id) + query)
			if p.status == http.StatusSeeOther && strings.HasPrefix(p.location, "https://elsewhere.example/") {
				t.Errorf("%s, not signed in: redirected to %s", query, p.location)
			}
			if p.status != http.StatusBadRequest {
				t.Errorf("%s, not signed in: %d; want 400 on a page here", query, p.status)
			}
		}
	})
}

// A call filed under a consent and run later (after its approval) runs
// only while the consent stands: ConsentInForce, which the live principal
// asks, follows revocation on every node and never answers for another
// organization.
func TestConsentInForce(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		ctx := t.Context()
		c := w.newClient()
		if _, err := c.exchange(0, c.authorize(w.browser(), nil)); err != nil {
			t.Fatal(err)
		}
		mine, err := w.nodes[0].as.Consents(ctx, alice, "")
		if err != nil || len(mine) != 1 {
			t.Fatalf("alice's consents: %v %+v", err, mine)
		}
		cred := authserver.CredentialPrefix + mine[0].ID
		ask := func(node int, org string) bool {
			t.Helper()
			ok, err := authserver.ConsentInForce(ctx, w.nodes[node].store, org, cred, 0, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !ask(1, alice.OrganizationID) {
			t.Fatal("a standing consent is not in force")
		}
		if ask(1, "another-org") {
			t.Fatal("another organization's consent is in force")
		}
		if err := w.nodes[0].as.RevokeConsent(ctx, alice, mine[0].ID); err != nil {
			t.Fatal(err)
		}
		if ask(1, alice.OrganizationID) {
			t.Fatal("a revoked consent is still in force on the other node")
		}
		if _, err := authserver.ConsentInForce(ctx, w.nodes[0].store, alice.OrganizationID, "tpk_x", 0, time.Now()); !errors.Is(err, toolplane.ErrInvalid) {
			t.Fatalf("an API key's id = %v; want ErrInvalid", err)
		}
	})
}
