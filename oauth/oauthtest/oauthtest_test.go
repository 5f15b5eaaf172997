package oauthtest_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
)

// TestSharedProvider: one provider serves parallel tests, each
// registering its client while the others' grants are issued, refreshed
// and revoked.
func TestSharedProvider(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	cb := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(cb.Close)
	m, err := oauth.Discover(t.Context(), p.HTTPClient(), p.Issuer)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			redirect := fmt.Sprintf("%s/cb/%d", cb.URL, i)
			id, secret := p.RegisterClient(redirect)
			cfg := oauth.Config{ClientID: id, ClientSecret: toolplane.SecretString(secret),
				Scopes: []string{"openid", "offline_access"}, HTTPClient: p.HTTPClient()}
			m.Apply(&cfg)
			authURL, state, verifier := oauth.Start(cfg, redirect, nil)
			back, err := p.Login(t.Context(), authURL)
			if err != nil {
				t.Fatalf("Login: %v", err)
			}
			if got := back.Scheme + "://" + back.Host + back.Path; got != redirect || back.Query().Get("state") != state {
				t.Fatalf("redirected to %s, want %s with the state", back, redirect)
			}
			tok, err := oauth.Exchange(t.Context(), cfg, back.Query().Get("code"), verifier, redirect)
			if err != nil {
				t.Fatalf("Exchange: %v", err)
			}
			if err := oauth.Revoke(t.Context(), cfg, tok.RefreshToken); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			var ge *oauth.GrantError
			if _, err := oauth.Refresh(t.Context(), cfg, tok.RefreshToken); !errors.As(err, &ge) {
				t.Fatalf("Refresh after Revoke = %v, want a *GrantError", err)
			}
		})
	}
}

// TestClientsAreSeparate: a client's code redeems for that client only,
// and a redirect URI not registered is refused before any login.
func TestClientsAreSeparate(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	m, err := oauth.Discover(t.Context(), p.HTTPClient(), p.Issuer)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	config := func(redirect string) oauth.Config {
		id, secret := p.RegisterClient(redirect)
		cfg := oauth.Config{ClientID: id, ClientSecret: toolplane.SecretString(secret), Scopes: []string{"openid"}, HTTPClient: p.HTTPClient()}
		m.Apply(&cfg)
		return cfg
	}
	a, b := config("http://127.0.0.1:1/a"), config("http://127.0.0.1:1/b")

	authURL, _, verifier := oauth.Start(a, "http://127.0.0.1:1/a", nil)
	back, err := p.Login(t.Context(), authURL)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	if _, err := oauth.Exchange(t.Context(), b, back.Query().Get("code"), verifier, "http://127.0.0.1:1/a"); err == nil {
		t.Errorf("another client redeemed the code")
	}

	authURL, _, _ = oauth.Start(a, "http://127.0.0.1:1/b", nil)
	if back, err := p.Login(t.Context(), authURL); err == nil {
		t.Errorf("an unregistered redirect URI was followed to %s", back)
	}
}
