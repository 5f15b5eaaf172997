package authserver_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
)

// TestFlow: a registered client, alice signed in with her key, consent,
// the code exchanged with PKCE; the token is the default agent acting for
// alice on /mcp, and on the other node too.
func TestFlow(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		tok, err := c.exchange(0, c.authorize(b, nil))
		if err != nil {
			t.Fatal(err)
		}
		if tok.RefreshToken == "" || tok.Extra("scope") != "tools" || tok.Type() != "Bearer" {
			t.Fatalf("token answer %+v", tok)
		}
		for i := range w.nodes {
			got, status := w.call(i, "/mcp", tok.AccessToken)
			if status != http.StatusOK {
				t.Fatalf("node %d: /mcp answered %d", i, status)
			}
			if got.Kind != toolplane.CredentialAgent || got.Subject != authserver.DefaultAgent || got.ActsFor != "alice" || got.Org != org ||
				got.ClientID != c.conf.ClientID || got.Tools != nil || !slices.Equal(got.Roles, []string{toolplane.RoleApprover}) {
				t.Fatalf("node %d: credential %+v", i, got)
			}
		}
		// A second authorization in the same browser needs no sign-in.
		if p := b.get(c.authURL()); p.status != http.StatusOK || !strings.Contains(p.body, `value="allow"`) {
			t.Fatalf("second authorization: %d %s", p.status, p.body)
		}
	})
}

// TestConsentPageAdmitsTheRedirect: a browser applies the consent page's
// form-action to the redirect that answers the form, so the page admits
// the client's redirect origin, and only it, beside its own.
func TestConsentPageAdmitsTheRedirect(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		p := w.browser().consent(c.authURL())
		if p.status != http.StatusOK || !strings.Contains(p.csp, "form-action 'self' http://127.0.0.1:33418;") || strings.Count(p.csp, "form-action") != 1 {
			t.Fatalf("consent page: %d, CSP %q", p.status, p.csp)
		}
		// A page without a form keeps the sign-in pages' policy.
		if p := w.browser().get(w.url(0, "/oauth/authorize?client_id=nobody")); strings.Contains(p.csp, "33418") || !strings.Contains(p.csp, "form-action 'self';") {
			t.Fatalf("error page CSP %q", p.csp)
		}
	})
}

// TestConsentNarrowing: ticked tools, or tool: scopes, narrow the token;
// a denial sends access_denied.
func TestConsentNarrowing(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		tok, err := c.exchange(0, c.authorize(b, url.Values{"tool": {"payments.refund", "not.offered"}}))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := w.call(0, "/mcp", tok.AccessToken); got == nil || !slices.Equal(got.Tools, []string{"payments.refund"}) {
			t.Fatalf("ticked one tool: %+v", got)
		}
		if tok.Extra("scope") != "tool:payments.refund" {
			t.Fatalf("scope %v", tok.Extra("scope"))
		}
		c.conf.Scopes = []string{"tool:docs.search", "tool:secret.tool"}
		tok, err = c.exchange(0, c.authorize(b, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := w.call(0, "/mcp", tok.AccessToken); got == nil || !slices.Equal(got.Tools, []string{"docs.search"}) {
			t.Fatalf("asked for two tools, one offered: %+v", got)
		}
		u := b.decide(b.consent(c.authURL()), "deny", nil)
		if u.Query().Get("error") != "access_denied" || u.Query().Get("code") != "" {
			t.Fatalf("denial sent %s", u)
		}
	})
}

// TestConsentForged: the consent POST must carry the session's CSRF token
// and come from the server's own origin.
func TestConsentForged(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		p := b.consent(c.authURL())
		form := p.hidden()
		form.Set("decision", "allow")
		form.Set("csrf", "forged")
		if res := b.post(w.base+"/oauth/authorize", form); res.status != http.StatusForbidden {
			t.Fatalf("a forged CSRF token answered %d %s", res.status, res.location)
		}
		form = p.hidden()
		form.Set("decision", "allow")
		req, _ := http.NewRequest(http.MethodPost, w.base+"/oauth/authorize", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if res := b.do(req); res.status != http.StatusForbidden {
			t.Fatalf("a cross-site POST answered %d %s", res.status, res.location)
		}
		if res := w.browser().post(w.base+"/oauth/authorize", form); res.status != http.StatusUnauthorized {
			t.Fatalf("a POST without a session answered %d", res.status)
		}
		if !strings.Contains(p.body, "payments.refund") || !strings.Contains(p.body, authserver.DefaultAgent) {
			t.Fatalf("the consent page does not show the tools and the agent: %s", p.body)
		}
	})
}

// TestCodeReplay: a code is good once; its second use revokes what the
// first issued.
func TestCodeReplay(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		code := c.authorize(w.browser(), nil)
		tok, err := c.exchange(0, code)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.exchange(1, code); oauthErr(err) != "invalid_grant" {
			t.Fatalf("replayed code: %v, want invalid_grant", err)
		}
		for i := range w.nodes {
			if _, status := w.call(i, "/mcp", tok.AccessToken); status != http.StatusUnauthorized {
				t.Fatalf("node %d: the first token after a replay answered %d", i, status)
			}
		}
		if _, err := c.refresh(0, tok.RefreshToken); oauthErr(err) != "invalid_grant" {
			t.Fatalf("the first refresh token after a replay: %v", err)
		}
	})
}

// TestPKCE: S256 only, a challenge required, the verifier required and
// checked.
func TestPKCE(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		b.signIn(b.get(c.authURL()))
		for name, tc := range map[string]struct {
			auth func() string
			want string
		}{
			"no challenge": {func() string { return c.conf.AuthCodeURL("st-123", oauth2.SetAuthURLParam("resource", w.base+"/mcp")) }, "invalid_request"},
			"plain": {func() string {
				return c.conf.AuthCodeURL("st-123", oauth2.SetAuthURLParam("code_challenge", c.verifier), oauth2.SetAuthURLParam("code_challenge_method", "plain"))
			}, "invalid_request"},
			"no method": {func() string {
				return c.conf.AuthCodeURL("st-123", oauth2.SetAuthURLParam("code_challenge", oauth2.S256ChallengeFromVerifier(c.verifier)))
			}, "invalid_request"},
			"token response": {func() string { return strings.Replace(c.authURL(), "response_type=code", "response_type=token", 1) }, "unsupported_response_type"},
			"other resource": {func() string { return c.authURL(oauth2.SetAuthURLParam("resource", "https://elsewhere.example/mcp")) }, "invalid_target"},
			"bad scope":      {func() string { return c.authURL(oauth2.SetAuthURLParam("scope", "admin")) }, "invalid_scope"},
		} {
			p := b.get(tc.auth())
			u, _ := url.Parse(p.location)
			if p.status != http.StatusSeeOther || u == nil || u.Query().Get("error") != tc.want || u.Query().Get("state") != "st-123" {
				t.Errorf("%s: %d to %q, want an %s redirect", name, p.status, p.location, tc.want)
			}
		}
		code := c.authorize(b, nil)
		noVerifier := c.conf
		if _, err := noVerifier.Exchange(t.Context(), code); oauthErr(err) != "invalid_request" {
			t.Fatalf("no verifier: %v", err)
		}
		if _, err := c.exchange(0, code); oauthErr(err) != "invalid_grant" {
			t.Fatalf("the code after an attempt without a verifier: %v, want it spent", err)
		}
		code = c.authorize(b, nil)
		other := oauth2.GenerateVerifier()
		if _, err := c.conf.Exchange(t.Context(), code, oauth2.VerifierOption(other)); oauthErr(err) != "invalid_grant" {
			t.Fatalf("wrong verifier: %v", err)
		}
		code = c.authorize(b, nil)
		if _, err := c.conf.Exchange(t.Context(), code, oauth2.SetAuthURLParam("code_verifier", c.verifier[:20])); oauthErr(err) != "invalid_grant" {
			t.Fatalf("a short verifier: %v", err)
		}
	})
}

// TestRedirectTampering: a redirect URI the client did not register is
// never redirected to; the token endpoint wants the one the code went to.
func TestRedirectTampering(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		b.signIn(b.get(c.authURL()))
		for _, bad := range []string{"https://evil.example/callback", redirect + "/", redirect + "?x=1", strings.ToUpper(redirect), "http://127.0.0.1:33419/callback"} {
			p := b.get(c.authURL(oauth2.SetAuthURLParam("redirect_uri", bad)))
			if p.status != http.StatusBadRequest || p.location != "" {
				t.Errorf("redirect_uri %q: %d to %q, want a page", bad, p.status, p.location)
			}
		}
		p := b.get(strings.Replace(c.authURL(), "client_id=", "client_id=tpc_unknown", 1))
		if p.status != http.StatusBadRequest || p.location != "" {
			t.Errorf("an unknown client: %d to %q", p.status, p.location)
		}
		code := c.authorize(b, nil)
		if _, err := c.exchange(0, code, oauth2.SetAuthURLParam("redirect_uri", "https://evil.example/callback")); oauthErr(err) != "invalid_grant" {
			t.Fatalf("exchange with another redirect_uri: %v", err)
		}
		// A client with one redirect URI may leave it out of both requests,
		// but not out of one only.
		bare := *c
		bare.conf.RedirectURL = ""
		u := b.decide(b.consent(bare.authURL()), "allow", nil)
		if _, err := c.exchange(0, u.Query().Get("code")); oauthErr(err) != "invalid_grant" {
			t.Fatalf("redirect_uri at the token endpoint only: %v", err)
		}
		u = b.decide(b.consent(bare.authURL()), "allow", nil)
		if _, err := bare.exchange(0, u.Query().Get("code")); err != nil {
			t.Fatalf("redirect_uri in neither request: %v", err)
		}
		other := w.newClient()
		code = c.authorize(b, nil)
		other.verifier = c.verifier
		if _, err := other.exchange(0, code); oauthErr(err) != "invalid_grant" {
			t.Fatalf("another client's code: %v", err)
		}
	})
}

// TestRefreshRotation: each refresh rotates; a refresh token used twice
// revokes the family, on every node.
func TestRefreshRotation(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		first, err := c.exchange(0, c.authorize(w.browser(), nil))
		if err != nil {
			t.Fatal(err)
		}
		second, err := c.refresh(1, first.RefreshToken)
		if err != nil {
			t.Fatal(err)
		}
		if second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken {
			t.Fatal("a refresh answered the same tokens")
		}
		if _, status := w.call(0, "/mcp", second.AccessToken); status != http.StatusOK {
			t.Fatalf("refreshed token: %d", status)
		}
		// The stolen first token, used again.
		if _, err := c.refresh(0, first.RefreshToken); oauthErr(err) != "invalid_grant" {
			t.Fatalf("reused refresh token: %v", err)
		}
		if _, err := c.refresh(1, second.RefreshToken); oauthErr(err) != "invalid_grant" {
			t.Fatalf("the family's newest refresh token after a reuse: %v", err)
		}
		for i := range w.nodes {
			if _, status := w.call(i, "/mcp", second.AccessToken); status != http.StatusUnauthorized {
				t.Fatalf("node %d: the family's access token after a reuse answered %d", i, status)
			}
		}
		other := w.newClient()
		third, err := c.exchange(0, c.authorize(w.browser(), nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.refresh(0, third.RefreshToken); oauthErr(err) != "invalid_grant" {
			t.Fatalf("another client's refresh token: %v", err)
		}
	})
}

// TestResourceBinding: a token authenticates only at the resource it was
// issued for.
func TestResourceBinding(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		b := w.browser()
		tok, err := c.exchange(0, c.authorize(b, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, status := w.call(0, "/mcp/billing", tok.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("an /mcp token at /mcp/billing: %d", status)
		}
		if _, status := w.call(0, "/v1/tools", tok.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("an /mcp token on the REST API: %d", status)
		}
		billing, err := c.exchange(0, c.authorize(b, nil, oauth2.SetAuthURLParam("resource", w.base+"/mcp/billing")))
		if err != nil {
			t.Fatal(err)
		}
		if _, status := w.call(1, "/mcp/billing", billing.AccessToken); status != http.StatusOK {
			t.Fatalf("a billing token at /mcp/billing: %d", status)
		}
		if _, status := w.call(1, "/mcp", billing.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("a billing token at /mcp: %d", status)
		}
		code := c.authorize(b, nil)
		if _, err := c.exchange(0, code, oauth2.SetAuthURLParam("resource", w.base+"/mcp/billing")); oauthErr(err) != "invalid_target" {
			t.Fatalf("exchange for another resource: %v", err)
		}
		// A client naming its endpoint's URL, listing asked for included,
		// as the resource is given the endpoint's token; another query is
		// not this server's resource.
		listing, err := c.exchange(0, c.authorize(b, nil, oauth2.SetAuthURLParam("resource", w.base+"/mcp?listing=meta")),
			oauth2.SetAuthURLParam("resource", w.base+"/mcp?listing=meta"))
		if err != nil {
			t.Fatal(err)
		}
		if _, status := w.call(0, "/mcp", listing.AccessToken); status != http.StatusOK {
			t.Fatalf("a token asked for /mcp?listing=meta at /mcp: %d", status)
		}
		if _, err := c.exchange(0, c.authorize(b, nil), oauth2.SetAuthURLParam("resource", w.base+"/mcp?x=1")); oauthErr(err) != "invalid_target" {
			t.Fatalf("a resource with another query: %v", err)
		}
		if _, status := w.call(0, "/mcp", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0."); status != http.StatusUnauthorized {
			t.Fatalf("an unsigned token: %d", status)
		}
	})
}
