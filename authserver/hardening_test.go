package authserver_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
)

// TestClientCap: past MaxClients no client is registered, on any node,
// and a metadata document new to the server is refused as well; a
// document client it holds already keeps working.
func TestClientCap(t *testing.T) {
	docs := documentServer(t)
	forEach(t, func(c *authserver.Config) {
		c.MaxClients, c.RegistrationsPerHour = 3, 100
		c.Egress, c.DocumentTimeout, c.DocumentMaxBytes = loopbackEgress(t, docs), 2*time.Second, 64<<10
	}, func(t *testing.T, w *world) {
		// The document client's first read stores it: one of the three.
		if p := w.browser().get(w.clientOf(docs.URL + "/good").authURL()); !strings.Contains(p.body, "personal API key") {
			t.Fatalf("a document client under the cap: %d %s, want the sign-in page", p.status, p.body)
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
		if p := w.browser().get(w.clientOf(docs.URL + "/another").authURL()); p.status != http.StatusBadRequest || !strings.Contains(p.body, "as many OAuth clients") {
			t.Fatalf("a new document client past the cap: %d %s", p.status, p.body)
		}
		// Node 1 never read /good: it finds the stored client, not the cap.
		b := w.browser()
		c := w.clientOf(docs.URL + "/good")
		if _, err := c.exchange(1, c.authorize(b, nil)); err != nil {
			t.Fatalf("the document client held already, past the cap: %v", err)
		}
		if l, err := w.nodes[0].store.OAuthClients(t.Context(), 100); err != nil || len(l) != 3 {
			t.Fatalf("clients stored: %v %d, want 3", err, len(l))
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
