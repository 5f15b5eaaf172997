package authserver_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
)

// TestClientCap: past MaxClients no client is registered, on any node,
// and a metadata document new to the server is not stored by a consent
// either; a document client it holds already keeps working.
func TestClientCap(t *testing.T) {
	docs := documentServer(t)
	forEach(t, func(c *authserver.Config) {
		c.MaxClients, c.RegistrationsPerHour = 3, 100
		c.Egress, c.DocumentTimeout, c.DocumentMaxBytes = loopbackEgress(t, docs), 2*time.Second, 64<<10
	}, func(t *testing.T, w *world) {
		// The document client's consent stores it: one of the three.
		good := w.clientOf(docs.URL + "/good")
		if _, err := good.exchange(0, good.authorize(w.browser(), nil)); err != nil {
			t.Fatalf("a document client under the cap: %v", err)
		}
		for i := range 2 {
			if _, status := w.register(i, redirect); status != http.StatusCreated {
				t.Fatalf("registration %d under the cap: %d", i, status)
			}
		}
		for i := range 2 {
			body, _ := json.Marshal(map[string]any{"client_name": "One too many", "redirect_uris": []string{redirect}})
			resp, err := http.Post(w.url(i, "/oauth/register"), "application/json", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Error, ErrorDescription string }
			var raw map[string]string
			json.NewDecoder(resp.Body).Decode(&raw)
			resp.Body.Close()
			got.Error, got.ErrorDescription = raw["error"], raw["error_description"]
			if resp.StatusCode != http.StatusBadRequest || got.Error != "invalid_client_metadata" || !strings.Contains(got.ErrorDescription, "--oauth-max-clients") {
				t.Fatalf("a registration past the cap on node %d: %d %+v, want 400 invalid_client_metadata naming the flag", i, resp.StatusCode, got)
			}
		}
		// A new document past the cap: its consent page is shown, the
		// consent is refused to the client, and nothing is stored.
		b := w.browser()
		u := b.decide(b.consent(w.clientOf(docs.URL+"/another").authURL()), "allow", nil)
		if q := u.Query(); q.Get("code") != "" || q.Get("error") != "temporarily_unavailable" || !strings.Contains(q.Get("error_description"), "as many OAuth clients") {
			t.Fatalf("a consent to a new document client past the cap sent the browser to %s", u)
		}
		// Node 1 never read /good: it finds the stored client, not the cap.
		if _, err := good.exchange(1, good.authorize(w.browser(), nil)); err != nil {
			t.Fatalf("the document client held already, past the cap: %v", err)
		}
		if l, err := w.nodes[0].store.OAuthClients(t.Context(), 100); err != nil || len(l) != 3 {
			t.Fatalf("clients stored: %v %d, want 3", err, len(l))
		}
	})
}

// TestDocumentClientStoredOnConsent: authorization requests naming
// metadata documents, which anyone may make before signing in, store no
// client, so they cannot fill the cap that registrations share; the
// document's client is stored when a person consents to it.
func TestDocumentClientStoredOnConsent(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": srv.URL + r.URL.Path, "client_name": "x", "redirect_uris": []string{redirect}})
	}))
	t.Cleanup(srv.Close)
	forEach(t, func(c *authserver.Config) {
		c.MaxClients, c.RegistrationsPerHour = 5, 100
		c.Egress, c.DocumentTimeout, c.DocumentMaxBytes = loopbackEgress(t, srv), 2*time.Second, 64<<10
	}, func(t *testing.T, w *world) {
		for i := range 5 {
			// A browser signed in nowhere reaches the sign-in page.
			if p := w.browser().get(w.clientOf(fmt.Sprintf("%s/anyone/%d", srv.URL, i)).authURL()); !strings.Contains(p.body, "personal API key") {
				t.Fatalf("document %d: %d %s, want the sign-in page", i, p.status, p.body)
			}
		}
		if l, err := w.nodes[0].store.OAuthClients(t.Context(), 100); err != nil || len(l) != 0 {
			t.Fatalf("clients stored by anonymous authorization requests: %v %d, want none", err, len(l))
		}
		if _, status := w.register(1, redirect); status != http.StatusCreated {
			t.Fatalf("a registration after anonymous requests naming 5 documents: %d", status)
		}
		c := w.clientOf(srv.URL + "/consented")
		if _, err := c.exchange(1, c.authorize(w.browser(), nil)); err != nil {
			t.Fatal(err)
		}
		got, err := w.nodes[1].store.GetOAuthClient(t.Context(), srv.URL+"/consented")
		if err != nil || got.Source != toolplane.OAuthClientDocument {
			t.Fatalf("the document client consented to: %v %+v, want it stored", err, got)
		}
	})
}

// clock is the authorization server's time, moved on by the test.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) advance(d time.Duration) { c.ahead.Add(int64(d)) }
func (w *world) oidcBrowser(signedIn time.Time) *browser {
	w.t.Helper()
	// A session as signin makes one after the OpenID provider's
	// callback, signed in at signedIn.
	token := rand.Text()
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	if err := w.nodes[0].store.InsertBrowserSession(w.t.Context(), &toolplane.BrowserSession{ID: toolplane.NewID("bss_"), OrganizationID: org,
		TokenHash: hex.EncodeToString(sum[:]), Subject: "alice", Method: toolplane.SignInOIDC, CredentialID: "oidc:https://idp.test:alice",
		Roles: []string{toolplane.RoleApprover}, CreatedAt: signedIn, IdleUntil: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
		w.t.Fatal(err)
	}
	b := w.browser()
	u, _ := url.Parse(w.base)
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, []*http.Cookie{{Name: "toolplane_session", Value: token, Path: "/"}})
	b.hc.Jar = jar
	return b
}

// TestOIDCConsentStopsRefreshing: a consent given after the OpenID
// provider's sign-in carries the provider's roles of then, so its tokens
// are refreshed only while that sign-in is younger than OIDCMaxAge; past
// it a refresh answers invalid_grant on every node, and the client must
// send the person through sign-in again. A consent given with the
// person's key (checked against the key at every call) refreshes on. A
// session already past the bound is told to sign in again at consent.
func TestOIDCConsentStopsRefreshing(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Hour
	for name, newStores := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var clk clock
			w := newWorld(t, newStores(t), func(c *authserver.Config) { c.OIDCMaxAge, c.Now = bound, clk.now })
			signedIn := clk.now().Add(-30 * time.Minute)
			oidc := w.newClient()
			tok, err := oidc.exchange(0, oidc.authorize(w.oidcBrowser(signedIn), nil))
			if err != nil {
				t.Fatalf("the OIDC consent's code: %v", err)
			}
			keyed := w.newClient()
			ktok, err := keyed.exchange(0, keyed.authorize(w.browser(), nil))
			if err != nil {
				t.Fatal(err)
			}
			if got, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusOK || got.ActsFor != "alice" {
				t.Fatalf("the OIDC consent's token: %d %+v", status, got)
			}

			// An hour on: the sign-in is 1.5 h old, under the bound.
			clk.advance(time.Hour)
			if tok, err = oidc.refresh(1, tok.RefreshToken); err != nil {
				t.Fatalf("refresh within the bound: %v", err)
			}
			if ktok, err = keyed.refresh(1, ktok.RefreshToken); err != nil {
				t.Fatal(err)
			}
			// Another hour: 2.5 h, past it.
			clk.advance(time.Hour)
			for i := range 2 {
				if _, err := oidc.refresh(i, tok.RefreshToken); oauthErr(err) != "invalid_grant" || !strings.Contains(err.Error(), "signs in anew") {
					t.Fatalf("refresh past the bound on node %d: %v, want invalid_grant", i, err)
				}
			}
			if _, err := keyed.refresh(0, ktok.RefreshToken); err != nil {
				t.Fatalf("the person-key consent past the OIDC bound: %v, want refreshed", err)
			}

			// A session whose sign-in reaches the bound is told to sign in
			// again: at the consent's POST (the page was shown a minute
			// before the bound), and on the consent page after. Its code
			// could never be refreshed.
			b := w.oidcBrowser(clk.now().Add(-bound + time.Minute))
			authURL := w.newClient().authURL()
			p := b.consent(authURL)
			if p.status != http.StatusOK || !strings.Contains(p.body, `value="allow"`) {
				t.Fatalf("the consent page a minute before the bound: %d %s", p.status, p.body)
			}
			clk.advance(2 * time.Minute)
			form := p.hidden()
			form.Set("decision", "allow")
			if res := b.post(w.base+"/oauth/authorize", form); res.status != http.StatusForbidden || !strings.Contains(res.body, "Sign in again") || res.location != "" {
				t.Fatalf("consent posted past the bound: %d %q %s", res.status, res.location, res.body)
			}
			if p := b.get(authURL); p.status != http.StatusForbidden || !strings.Contains(p.body, "Sign in again") {
				t.Fatalf("the consent page past the bound: %d %s", p.status, p.body)
			}
			if l, err := w.nodes[0].store.OAuthGrants(t.Context(), org, "alice"); err != nil || len(l) != 2 {
				t.Fatalf("alice's consents: %v %d, want the two given before the bound", err, len(l))
			}
		})
	}
}

// TestOIDCAccessTokenEndsWithSignIn: the access token minted just inside
// the OpenID sign-in's bound ends at the bound, not an access TTL past it.
func TestOIDCAccessTokenEndsWithSignIn(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Hour
	for name, newStores := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var clk clock
			w := newWorld(t, newStores(t), func(c *authserver.Config) { c.OIDCMaxAge, c.AccessTTL, c.Now = bound, 12*time.Hour, clk.now })
			c := w.newClient()
			signedIn := clk.now().Add(-bound + 5*time.Minute)
			tok, err := c.exchange(0, c.authorize(w.oidcBrowser(signedIn), nil))
			if err != nil {
				t.Fatal(err)
			}
			if in, _ := tok.Extra("expires_in").(float64); in <= 0 || in > (5*time.Minute).Seconds() {
				t.Fatalf("the token's expires_in %v s, want at most the 5 minutes left of the sign-in's bound", in)
			}
			if got, status := w.call(1, "/mcp", tok.AccessToken); status != http.StatusOK || got.ActsFor != "alice" {
				t.Fatalf("the token within the bound: %d %+v", status, got)
			}
			clk.advance(6 * time.Hour) // the sign-in is 8 h old, four times the bound
			for i := range 2 {
				if got, status := w.call(i, "/mcp", tok.AccessToken); status != http.StatusUnauthorized {
					t.Fatalf("the token 6 h past its sign-in's bound on node %d: %d %+v", i, status, got)
				}
			}
		})
	}
}

// TestOIDCConsentInForceEndsWithSignIn: a call filed under a consent
// through the OpenID provider and run later runs only while the sign-in
// behind it is within the bound; a consent given with the person's key
// is not bound by it.
func TestOIDCConsentInForceEndsWithSignIn(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Hour
	for name, newStores := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, newStores(t), func(c *authserver.Config) { c.OIDCMaxAge = bound })
			ctx := t.Context()
			signedIn := time.Now().Add(-time.Hour)
			oidc := w.newClient()
			if _, err := oidc.exchange(0, oidc.authorize(w.oidcBrowser(signedIn), nil)); err != nil {
				t.Fatal(err)
			}
			keyed := w.newClient()
			if _, err := keyed.exchange(0, keyed.authorize(w.browser(), nil)); err != nil {
				t.Fatal(err)
			}
			mine, err := w.nodes[0].as.Consents(ctx, alice, "")
			if err != nil || len(mine) != 2 {
				t.Fatalf("alice's consents: %v %+v", err, mine)
			}
			cred := map[string]string{}
			for _, c := range mine {
				cred[c.ClientID] = authserver.CredentialPrefix + c.ID
			}
			tests := []struct {
				name   string
				client *client
				maxAge time.Duration
				at     time.Time
				want   bool
			}{
				{"OpenID, within the bound", oidc, bound, signedIn.Add(bound - time.Minute), true},
				{"OpenID, at the bound", oidc, bound, signedIn.Add(bound), false},
				{"OpenID, past the bound", oidc, bound, signedIn.Add(bound + time.Hour), false},
				{"OpenID, the default bound", oidc, 0, signedIn.Add(authserver.DefaultOIDCMaxAge), false},
				{"OpenID, no bound", oidc, -1, signedIn.Add(30 * 24 * time.Hour), true},
				{"person key, past the bound", keyed, bound, signedIn.Add(bound + time.Hour), true},
			}
			for _, tt := range tests {
				ok, err := authserver.ConsentInForce(ctx, w.nodes[1].store, org, cred[tt.client.conf.ClientID], tt.maxAge, tt.at)
				if err != nil || ok != tt.want {
					t.Errorf("%s: %v %v, want %v", tt.name, ok, err, tt.want)
				}
			}
		})
	}
}
