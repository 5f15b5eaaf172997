package authserver_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

var (
	alice = &toolplane.Credential{ID: "tpk_alice", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "alice"}
	bob   = &toolplane.Credential{ID: "tpk_bob", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "bob"}
	admin = &toolplane.Credential{ID: "tpk_admin", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "root",
		Roles: []string{toolplane.RolePlatformAdmin}}
	otherAdmin = &toolplane.Credential{ID: "tpk_other", OrganizationID: "globex", Kind: toolplane.CredentialPerson, Subject: "root",
		Roles: []string{toolplane.RolePlatformAdmin}}
)

// TestConsentRevocation: alice lists and revokes her consent on node 0;
// the token is refused on node 1 at its next call. Bob sees none of it;
// an admin of another organization reaches nothing.
func TestConsentRevocation(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		ctx := t.Context()
		c := w.newClient()
		tok, err := c.exchange(0, c.authorize(w.browser(), nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusOK {
			t.Fatalf("before revocation: %d", status)
		}
		a, b := w.nodes[0].as, w.nodes[1].as
		mine, err := a.Consents(ctx, alice, "")
		if err != nil || len(mine) != 1 || mine[0].ClientID != c.conf.ClientID || mine[0].Scope != "tools" {
			t.Fatalf("alice's consents: %v %+v", err, mine)
		}
		if l, err := b.Consents(ctx, bob, ""); err != nil || len(l) != 0 {
			t.Fatalf("bob's consents: %v %+v", err, l)
		}
		if _, err := b.Consents(ctx, bob, "alice"); !errors.Is(err, toolplane.ErrForbidden) {
			t.Fatalf("bob reading alice's: %v", err)
		}
		if err := b.RevokeConsent(ctx, bob, mine[0].ID); !errors.Is(err, toolplane.ErrNotFound) {
			t.Fatalf("bob revoking alice's: %v", err)
		}
		if err := b.RevokeConsent(ctx, otherAdmin, mine[0].ID); !errors.Is(err, toolplane.ErrNotFound) {
			t.Fatalf("another organization's admin revoking: %v", err)
		}
		if l, err := b.Consents(ctx, admin, ""); err != nil || len(l) != 1 {
			t.Fatalf("the admin's list: %v %+v", err, l)
		}
		if err := a.RevokeConsent(ctx, alice, mine[0].ID); err != nil {
			t.Fatal(err)
		}
		for i := range w.nodes {
			if _, status := w.call(i, "/mcp", tok.AccessToken); status != http.StatusUnauthorized {
				t.Fatalf("node %d after revocation: %d", i, status)
			}
		}
		if _, err := c.refresh(1, tok.RefreshToken); oauthErr(err) != "invalid_grant" {
			t.Fatalf("refresh after revocation: %v", err)
		}
		events, _, err := w.nodes[0].store.ListAudit(ctx, org, toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditOAuth}}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		outcomes := ""
		for _, e := range events {
			outcomes += e.Outcome + "/" + e.PrincipalID + " "
		}
		if !strings.Contains(outcomes, "consented/alice") || !strings.Contains(outcomes, "revoked/alice") {
			t.Fatalf("audit events %q lack the consent and its revocation", outcomes)
		}
	})
}

// TestClientRevocation: an admin revokes a client for the organization:
// its consents go, and nobody of the organization may connect it again.
// The client's agent identity is the admin's to set.
func TestClientRevocation(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		ctx := t.Context()
		c := w.newClient()
		a, b := w.nodes[0].as, w.nodes[1].as
		if err := a.SetClientAgent(ctx, admin, c.conf.ClientID, "claude-desktop"); err != nil {
			t.Fatal(err)
		}
		if err := a.SetClientAgent(ctx, alice, c.conf.ClientID, "x"); !errors.Is(err, toolplane.ErrForbidden) {
			t.Fatalf("alice setting the agent: %v", err)
		}
		br := w.browser()
		tok, err := c.exchange(0, c.authorize(br, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := w.call(1, "/mcp", tok.AccessToken); got == nil || got.Subject != "claude-desktop" || got.ActsFor != "alice" {
			t.Fatalf("the client's agent: %+v", got)
		}
		if _, err := b.Clients(ctx, alice); !errors.Is(err, toolplane.ErrForbidden) {
			t.Fatalf("alice listing clients: %v", err)
		}
		n, err := b.RevokeClient(ctx, admin, c.conf.ClientID)
		if err != nil || n != 1 {
			t.Fatalf("revoke client: %d %v", n, err)
		}
		if _, status := w.call(0, "/mcp", tok.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("a revoked client's token: %d", status)
		}
		// Each change's event is in the trail, the revocation's with how
		// many consents it revoked.
		events, _, err := w.nodes[0].store.ListAudit(ctx, admin.OrganizationID, toolplane.AuditFilter{Kinds: []toolplane.AuditKind{toolplane.AuditOAuth}}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, e := range events {
			if e.Subject == c.conf.ClientID {
				seen[e.Outcome] = e.Reason
			}
		}
		if seen["client_agent_set"] != "agent claude-desktop" || seen["client_revoked"] != "1 consents revoked" {
			t.Fatalf("the client's events: %q", seen)
		}
		u := br.get(c.authURL())
		if loc, _ := url.Parse(u.location); loc == nil || loc.Query().Get("error") != "access_denied" {
			t.Fatalf("authorizing a revoked client: %d %q", u.status, u.location)
		}
		list, err := a.Clients(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range list {
			if v.ClientID == c.conf.ClientID {
				found = v.RevokedAt != nil && v.AgentID == "claude-desktop"
			}
		}
		if !found {
			t.Fatalf("clients %+v", list)
		}
		other, err := a.Clients(ctx, otherAdmin)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range other {
			if v.ClientID == c.conf.ClientID {
				t.Fatalf("another organization, whose people never consented to it, lists this one's client: %+v", v)
			}
		}
	})
}

// TestRevokeAndIntrospect: RFC 7009 and RFC 7662 for the client's own
// tokens; another client's token is inactive to it and not revoked by it.
func TestRevokeAndIntrospect(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c, other := w.newClient(), w.newClient()
		tok, err := c.exchange(0, c.authorize(w.browser(), nil))
		if err != nil {
			t.Fatal(err)
		}
		post := func(i int, path, token, client string) map[string]any {
			resp, err := http.PostForm(w.url(i, path), url.Values{"token": {token}, "client_id": {client}})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d", path, resp.StatusCode)
			}
			var out map[string]any
			json.NewDecoder(resp.Body).Decode(&out)
			return out
		}
		if got := post(1, "/oauth/introspect", tok.AccessToken, c.conf.ClientID); got["active"] != true || got["sub"] != "alice" || got["client_id"] != c.conf.ClientID {
			t.Fatalf("introspect: %+v", got)
		}
		if got := post(1, "/oauth/introspect", tok.RefreshToken, c.conf.ClientID); got["active"] != true || got["token_type"] != "refresh_token" {
			t.Fatalf("introspect the refresh token: %+v", got)
		}
		if got := post(1, "/oauth/introspect", tok.AccessToken, other.conf.ClientID); got["active"] != false {
			t.Fatalf("introspect by another client: %+v", got)
		}
		post(0, "/oauth/revoke", tok.RefreshToken, other.conf.ClientID)
		if _, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusOK {
			t.Fatalf("after another client's revocation attempt: %d", status)
		}
		post(0, "/oauth/revoke", "garbage", c.conf.ClientID)
		post(0, "/oauth/revoke", tok.AccessToken, c.conf.ClientID)
		if _, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("after revocation: %d", status)
		}
		if got := post(1, "/oauth/introspect", tok.AccessToken, c.conf.ClientID); got["active"] != false {
			t.Fatalf("introspect after revocation: %+v", got)
		}
	})
}

// TestConnectedPage: alice's page lists her connected client and its
// button revokes it; the form needs her session's CSRF token.
func TestConnectedPage(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		tok, err := c.exchange(0, c.authorize(b, nil))
		if err != nil {
			t.Fatal(err)
		}
		p := b.get(w.base + "/oauth/consents")
		if p.status != http.StatusOK || !strings.Contains(p.body, c.conf.ClientID) {
			t.Fatalf("connected clients: %d %s", p.status, p.body)
		}
		form := p.hidden()
		forged := url.Values{"id": form["id"], "csrf": {"forged"}}
		if res := b.post(w.base+"/oauth/consents/revoke", forged); res.status != http.StatusForbidden {
			t.Fatalf("a forged revocation: %d", res.status)
		}
		if _, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusOK {
			t.Fatalf("after a forged revocation: %d", status)
		}
		if res := b.post(w.base+"/oauth/consents/revoke", form); res.status != http.StatusOK || strings.Contains(res.body, c.conf.ClientID) {
			t.Fatalf("revoke from the page: %d %s", res.status, res.body)
		}
		if _, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("after revocation from the page: %d", status)
		}
		if p := w.browser().get(w.base + "/oauth/consents"); !strings.Contains(p.body, "personal API key") {
			t.Fatalf("without a session: %d", p.status)
		}
	})
}
