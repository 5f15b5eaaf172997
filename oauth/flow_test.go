package oauth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
)

// callback is a client's redirect URI: it captures what the provider
// hands back.
type callback struct {
	srv *httptest.Server
	mu  sync.Mutex
	got url.Values
}

func newCallback(t *testing.T) *callback {
	c := &callback{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.got = r.URL.Query()
		c.mu.Unlock()
		w.Write([]byte("connected"))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *callback) URL() string { return c.srv.URL + "/callback" }

// follow requests the provider's final redirect, as the person's browser
// would, and answers what the callback captured.
func (c *callback) follow(t *testing.T, redirect *url.URL) url.Values {
	t.Helper()
	resp, err := c.srv.Client().Get(redirect.String())
	if err != nil {
		t.Fatalf("following the redirect: %v", err)
	}
	resp.Body.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		t.Fatalf("the callback captured nothing from %s", redirect)
	}
	return c.got
}

// connect discovers the provider and answers a Config for a client
// registered with redirectURI.
func connect(t *testing.T, p *oauthtest.Provider, redirectURI string) oauth.Config {
	t.Helper()
	id, secret := p.RegisterClient(redirectURI)
	hc := p.HTTPClient()
	m, err := oauth.Discover(t.Context(), hc, p.Issuer)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	cfg := oauth.NewConfig(toolplane.ConnectionConfig{
		Issuer:       p.Issuer,
		ClientID:     id,
		RequestScope: []string{"openid", "offline_access"},
		Resource:     "https://mcp.toolplane.test/mcp",
	}, toolplane.Secrets{ClientSecret: toolplane.SecretString(secret)}, hc)
	m.Apply(&cfg)
	return cfg
}

// consent runs Start and the person's login, and answers the code the
// callback received with the verifier.
func consent(t *testing.T, p *oauthtest.Provider, cb *callback, cfg oauth.Config, scopes []string) (code, verifier string) {
	t.Helper()
	authURL, state, verifier := oauth.Start(cfg, cb.URL(), scopes)
	redirect, err := p.Login(t.Context(), authURL)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	got := cb.follow(t, redirect)
	if got.Get("error") != "" {
		t.Fatalf("the provider answered %s: %s", got.Get("error"), got.Get("error_description"))
	}
	if got.Get("state") != state {
		t.Fatalf("state = %q, want %q", got.Get("state"), state)
	}
	if got.Get("code") == "" {
		t.Fatalf("no code in %v", got)
	}
	return got.Get("code"), verifier
}

func TestAuthorizationCodeFlow(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	cb := newCallback(t)
	cfg := connect(t, p, cb.URL())
	ctx := t.Context()

	wanted := []string{"openid", "offline_access", "tools.write"}
	code, verifier := consent(t, p, cb, cfg, wanted)

	// PKCE is enforced: another verifier does not redeem the code.
	_, err := oauth.Exchange(ctx, cfg, code, oauth2.GenerateVerifier(), cb.URL())
	var ge *oauth.GrantError
	if !errors.As(err, &ge) {
		t.Fatalf("Exchange with a wrong verifier = %v, want a *GrantError", err)
	}
	if oauth.Retryable(err) {
		t.Errorf("a refused grant is retryable: %v", err)
	}

	tok, err := oauth.Exchange(ctx, cfg, code, verifier, cb.URL())
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("Exchange answered access %t, refresh %t; want both", tok.AccessToken != "", tok.RefreshToken != "")
	}
	if until := time.Until(tok.Expiry); until <= 0 || until > time.Hour {
		t.Errorf("Expiry in %v, want within the next hour", until)
	}
	// The provider grants only the scopes it knows: the one it dropped
	// is missing, and asks for consent again.
	if !slices.Contains(tok.Scopes, "openid") {
		t.Errorf("Scopes = %v, want openid granted", tok.Scopes)
	}
	for _, w := range wanted {
		if got, want := slices.Contains(tok.Scopes, w), w != "tools.write"; got != want {
			t.Errorf("Scopes = %v: %s granted %t, want %t (only tools.write missing)", tok.Scopes, w, got, want)
		}
	}

	// A code is spent once.
	if _, err := oauth.Exchange(ctx, cfg, code, verifier, cb.URL()); !errors.As(err, &ge) {
		t.Errorf("Exchange of a spent code = %v, want a *GrantError", err)
	}

	refreshed, err := oauth.Refresh(ctx, cfg, tok.RefreshToken)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if refreshed.AccessToken == "" || refreshed.AccessToken == tok.AccessToken {
		t.Errorf("Refresh did not answer a new access token")
	}
	if refreshed.RefreshToken == "" {
		t.Fatalf("Refresh answered no refresh token")
	}
	if time.Until(refreshed.Expiry) <= 0 {
		t.Errorf("refreshed Expiry %v is past", refreshed.Expiry)
	}
	// The provider rotates refresh tokens: the old one is refused now.
	if refreshed.RefreshToken != tok.RefreshToken {
		if _, err := oauth.Refresh(ctx, cfg, tok.RefreshToken); !errors.As(err, &ge) {
			t.Errorf("Refresh with the rotated-out token = %v, want a *GrantError", err)
		}
	}

	if err := oauth.Revoke(ctx, cfg, refreshed.RefreshToken); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	_, err = oauth.Refresh(ctx, cfg, refreshed.RefreshToken)
	if !errors.As(err, &ge) {
		t.Fatalf("Refresh after Revoke = %v, want a *GrantError", err)
	}
	if ge.Op != "refresh" {
		t.Errorf("GrantError.Op = %q, want refresh", ge.Op)
	}
}

func TestClientCredentials(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	hc := p.HTTPClient()
	m, err := oauth.Discover(t.Context(), hc, p.Issuer)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	for _, tc := range []struct {
		name   string
		secret string
		ok     bool
	}{
		{"issued", oauthtest.ServiceClientSecret, true},
		{"wrong secret", "not-the-secret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := oauth.Config{ClientID: oauthtest.ServiceClientID, ClientSecret: toolplane.SecretString(tc.secret), HTTPClient: hc}
			m.Apply(&cfg)
			tok, err := oauth.ClientCredentials(t.Context(), cfg, []string{"openid"})
			if !tc.ok {
				var pe *oauth.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("ClientCredentials = %v, want a *ProviderError", err)
				}
				if oauth.Retryable(err) {
					t.Errorf("a refused client is retryable: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClientCredentials: %v", err)
			}
			if tok.AccessToken == "" || tok.RefreshToken != "" {
				t.Errorf("answered access %t, refresh %t; want an access token only", tok.AccessToken != "", tok.RefreshToken != "")
			}
			if !slices.Equal(tok.Scopes, []string{"openid"}) {
				t.Errorf("Scopes = %v, want [openid]", tok.Scopes)
			}
			if time.Until(tok.Expiry) <= 0 {
				t.Errorf("Expiry %v is past", tok.Expiry)
			}
		})
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	cfg := oauth.Config{
		AuthorizeURL: "https://auth.example.com/authorize?tenant=a",
		ClientID:     "client-1",
		Scopes:       []string{"read", "write"},
		Resource:     "https://mcp.example.com/mcp",
	}
	seen := map[string]bool{}
	for range 3 {
		authURL, state, verifier := oauth.Start(cfg, "https://toolplane.example.com/cb", nil)
		for _, v := range []string{state, verifier} {
			b, err := base64.RawURLEncoding.DecodeString(v)
			if err != nil || len(b) != 32 {
				t.Fatalf("%q is not 32 bytes of base64url: %v", v, err)
			}
			if seen[v] {
				t.Fatalf("%q repeated", v)
			}
			seen[v] = true
		}
		u, err := url.Parse(authURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		want := map[string]string{
			"tenant":                "a",
			"response_type":         "code",
			"client_id":             "client-1",
			"redirect_uri":          "https://toolplane.example.com/cb",
			"scope":                 "read write",
			"state":                 state,
			"code_challenge_method": "S256",
			"code_challenge":        oauth2.S256ChallengeFromVerifier(verifier),
			"resource":              "https://mcp.example.com/mcp",
		}
		for k, v := range want {
			if q.Get(k) != v {
				t.Errorf("%s = %q, want %q", k, q.Get(k), v)
			}
		}
		if q.Has("code_verifier") {
			t.Errorf("the verifier left in the authorization URL")
		}
	}
	authURL, _, _ := oauth.Start(cfg, "https://toolplane.example.com/cb", []string{"admin"})
	if u, _ := url.Parse(authURL); u.Query().Get("scope") != "admin" {
		t.Errorf("scopes given = %q, want admin", u.Query().Get("scope"))
	}
}

func TestLoginRefusesWrongPassword(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	cb := newCallback(t)
	cfg := connect(t, p, cb.URL())
	authURL, _, _ := oauth.Start(cfg, cb.URL(), nil)
	if u, err := p.LoginAs(context.Background(), authURL, p.Username, "wrong"); err == nil {
		t.Fatalf("LoginAs with a wrong password redirected to %s", u)
	}
}
