package oauth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/oauth"
	"github.com/toolplane/toolplane/oauth/oauthtest"
)

// documents serves fixed answers by path; "{origin}" in a body is the
// server's own URL. A path not listed answers 404.
type answer struct {
	status int
	ctype  string
	body   string
}

func serve(t *testing.T, paths map[string]answer) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := paths[r.URL.EscapedPath()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if a.ctype == "" {
			a.ctype = "application/json"
		}
		w.Header().Set("Content-Type", a.ctype)
		if a.status == 0 {
			a.status = http.StatusOK
		}
		w.WriteHeader(a.status)
		w.Write([]byte(strings.ReplaceAll(a.body, "{origin}", srv.URL)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func metadata(issuer string) string {
	return `{"issuer":"` + issuer + `","authorization_endpoint":"{origin}/authorize","token_endpoint":"{origin}/token","revocation_endpoint":"{origin}/revoke","code_challenge_methods_supported":["S256"]}`
}

func TestDiscoverRealProvider(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	m, err := oauth.Discover(t.Context(), p.HTTPClient(), p.Issuer)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if m.Issuer != p.Issuer || !strings.HasPrefix(m.TokenEndpoint, p.Issuer+"/") ||
		!strings.HasPrefix(m.AuthorizationEndpoint, p.Issuer+"/") || !strings.HasPrefix(m.RevocationEndpoint, p.Issuer+"/") {
		t.Errorf("metadata %+v does not name the provider's endpoints", m)
	}
	if !m.SupportsS256() {
		t.Errorf("the provider does not say it supports S256: %v", m.CodeChallengeMethodsSupported)
	}
	// The issuer with a trailing slash is another issuer (RFC 8414
	// section 3.3 compares them as strings): the document is refused.
	if _, err := oauth.Discover(t.Context(), p.HTTPClient(), p.Issuer+"/"); !errors.Is(err, oauth.ErrIssuerMismatch) {
		t.Errorf("Discover of %s/ = %v, want ErrIssuerMismatch", p.Issuer, err)
	}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// path is the issuer's path under the server.
		path  string
		paths map[string]answer
		// issuer overrides the issuer asked for ("{origin}" replaced).
		issuer    string
		want      error
		retryable bool
	}{
		{
			name:  "RFC 8414",
			paths: map[string]answer{"/.well-known/oauth-authorization-server": {body: metadata("{origin}")}},
		},
		{
			name:  "OpenID after a missing RFC 8414 document",
			paths: map[string]answer{"/.well-known/openid-configuration": {body: metadata("{origin}")}},
		},
		{
			name: "OpenID after an HTML page at the RFC 8414 URL",
			paths: map[string]answer{
				"/.well-known/oauth-authorization-server": {ctype: "text/html", body: "<html>sign in</html>"},
				"/.well-known/openid-configuration":       {body: metadata("{origin}")},
			},
		},
		{
			name:  "issuer with a path, RFC 8414 inserted",
			path:  "/tenant/a",
			paths: map[string]answer{"/.well-known/oauth-authorization-server/tenant/a": {body: metadata("{origin}/tenant/a")}},
		},
		{
			name:  "issuer with a path, OpenID inserted",
			path:  "/tenant/a",
			paths: map[string]answer{"/.well-known/openid-configuration/tenant/a": {body: metadata("{origin}/tenant/a")}},
		},
		{
			name:  "issuer with a path, OpenID appended",
			path:  "/tenant/a",
			paths: map[string]answer{"/tenant/a/.well-known/openid-configuration": {body: metadata("{origin}/tenant/a")}},
		},
		{
			name:  "issuer mismatch",
			paths: map[string]answer{"/.well-known/oauth-authorization-server": {body: metadata("https://other.example.com")}},
			want:  oauth.ErrIssuerMismatch,
		},
		{
			// The first document found decides: a mismatch is not passed
			// over for a later one that matches.
			name: "issuer mismatch before a matching document",
			paths: map[string]answer{
				"/.well-known/oauth-authorization-server": {body: metadata("https://other.example.com")},
				"/.well-known/openid-configuration":       {body: metadata("{origin}")},
			},
			want: oauth.ErrIssuerMismatch,
		},
		{
			name:  "plain http endpoint elsewhere",
			paths: map[string]answer{"/.well-known/oauth-authorization-server": {body: `{"issuer":"{origin}","token_endpoint":"http://auth.example.com/token"}`}},
			want:  oauth.ErrInsecureEndpoint,
		},
		{
			name:   "plain http issuer elsewhere",
			issuer: "http://auth.example.com",
			want:   oauth.ErrInsecureEndpoint,
		},
		{
			name:  "no token endpoint",
			paths: map[string]answer{"/.well-known/oauth-authorization-server": {body: `{"issuer":"{origin}"}`}},
			want:  oauth.ErrNoMetadata,
		},
		{
			name: "nothing",
			want: oauth.ErrNoMetadata,
		},
		{
			name:  "not JSON",
			paths: map[string]answer{"/.well-known/openid-configuration": {body: `{"issuer":`}},
			want:  oauth.ErrNoMetadata,
		},
		{
			name: "provider failing",
			paths: map[string]answer{
				"/.well-known/oauth-authorization-server": {status: http.StatusServiceUnavailable},
				"/.well-known/openid-configuration":       {status: http.StatusBadGateway},
			},
			retryable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, tc.paths)
			issuer := srv.URL + tc.path
			if tc.issuer != "" {
				issuer = tc.issuer
			}
			m, err := oauth.Discover(t.Context(), srv.Client(), issuer)
			switch {
			case tc.retryable:
				if !oauth.Retryable(err) {
					t.Fatalf("Discover = %v, want a *TransientError", err)
				}
			case tc.want != nil:
				if !errors.Is(err, tc.want) || !errors.Is(err, toolplane.ErrInvalid) {
					t.Fatalf("Discover = %v, want %v (invalid)", err, tc.want)
				}
			case err != nil:
				t.Fatalf("Discover: %v", err)
			default:
				if m.Issuer != issuer || m.TokenEndpoint != srv.URL+"/token" || m.RevocationEndpoint != srv.URL+"/revoke" {
					t.Errorf("metadata %+v", m)
				}
			}
		})
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	m := &oauth.Metadata{
		AuthorizationEndpoint: "https://a.example.com/authorize",
		TokenEndpoint:         "https://a.example.com/token",
		RevocationEndpoint:    "https://a.example.com/revoke",
	}
	for _, tc := range []struct {
		name    string
		methods []string
		cfg     oauth.Config
		want    oauth.Config
	}{
		{
			name: "fills what is empty",
			cfg:  oauth.Config{TokenURL: "https://b.example.com/token", ClientSecret: "s"},
			want: oauth.Config{AuthorizeURL: m.AuthorizationEndpoint, TokenURL: "https://b.example.com/token",
				RevokeURL: m.RevocationEndpoint, ClientSecret: "s", AuthMethod: oauth.AuthSecretBasic},
		},
		{
			name:    "post when basic is not offered",
			methods: []string{"private_key_jwt", "client_secret_post"},
			cfg:     oauth.Config{ClientSecret: "s"},
			want: oauth.Config{AuthorizeURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint,
				RevokeURL: m.RevocationEndpoint, ClientSecret: "s", AuthMethod: oauth.AuthSecretPost},
		},
		{
			name:    "basic when both are",
			methods: []string{"client_secret_post", "client_secret_basic"},
			cfg:     oauth.Config{ClientSecret: "s"},
			want: oauth.Config{AuthorizeURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint,
				RevokeURL: m.RevocationEndpoint, ClientSecret: "s", AuthMethod: oauth.AuthSecretBasic},
		},
		{
			name:    "public client keeps none",
			methods: []string{"client_secret_post"},
			cfg:     oauth.Config{},
			want:    oauth.Config{AuthorizeURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint, RevokeURL: m.RevocationEndpoint},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := *m
			m.TokenEndpointAuthMethodsSupported = tc.methods
			m.Apply(&tc.cfg)
			if tc.cfg.AuthorizeURL != tc.want.AuthorizeURL || tc.cfg.TokenURL != tc.want.TokenURL ||
				tc.cfg.RevokeURL != tc.want.RevokeURL || tc.cfg.AuthMethod != tc.want.AuthMethod {
				t.Errorf("Apply = %+v, want %+v", tc.cfg, tc.want)
			}
		})
	}
}

func TestDiscoverResource(t *testing.T) {
	t.Parallel()
	p := oauthtest.Start(t)
	prm := func(resource string, servers ...string) string {
		return `{"resource":"` + resource + `","authorization_servers":["` + strings.Join(servers, `","`) + `"]}`
	}
	for _, tc := range []struct {
		name      string
		paths     map[string]answer
		challenge string
		want      error
		retryable bool
	}{
		{
			name:      "from the 401's challenge",
			paths:     map[string]answer{"/meta/prm": {body: prm("{origin}/mcp", p.Issuer)}},
			challenge: `Bearer realm="mcp", error="invalid_token", resource_metadata="{origin}/meta/prm"`,
		},
		{
			name:  "well-known URL of the path",
			paths: map[string]answer{"/.well-known/oauth-protected-resource/mcp": {body: prm("{origin}/mcp", p.Issuer)}},
		},
		{
			name:      "well-known URL of the origin, a parent resource",
			paths:     map[string]answer{"/.well-known/oauth-protected-resource": {body: prm("{origin}/", p.Issuer)}},
			challenge: `Bearer realm="mcp"`,
		},
		{
			name:  "another resource",
			paths: map[string]answer{"/.well-known/oauth-protected-resource/mcp": {body: prm("{origin}/other", p.Issuer)}},
			want:  oauth.ErrResourceMismatch,
		},
		{
			name:  "a sibling path is not a parent",
			paths: map[string]answer{"/.well-known/oauth-protected-resource": {body: prm("{origin}/mc", p.Issuer)}},
			want:  oauth.ErrResourceMismatch,
		},
		{
			name:  "another origin",
			paths: map[string]answer{"/.well-known/oauth-protected-resource/mcp": {body: prm("https://evil.example.com/mcp", p.Issuer)}},
			want:  oauth.ErrResourceMismatch,
		},
		{
			name:  "plain http authorization server elsewhere",
			paths: map[string]answer{"/.well-known/oauth-protected-resource/mcp": {body: prm("{origin}/mcp", "http://auth.example.com")}},
			want:  oauth.ErrInsecureEndpoint,
		},
		{
			name:      "plain http metadata URL elsewhere",
			challenge: `Bearer resource_metadata="http://evil.example.com/prm"`,
			want:      oauth.ErrInsecureEndpoint,
		},
		{
			name:  "no authorization server",
			paths: map[string]answer{"/.well-known/oauth-protected-resource/mcp": {body: `{"resource":"{origin}/mcp"}`}},
			want:  oauth.ErrNoMetadata,
		},
		{
			name: "nothing",
			want: oauth.ErrNoMetadata,
		},
		{
			name:      "failing",
			paths:     map[string]answer{"/meta/prm": {status: http.StatusInternalServerError}},
			challenge: `Bearer resource_metadata="{origin}/meta/prm"`,
			retryable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, tc.paths)
			challenge := strings.ReplaceAll(tc.challenge, "{origin}", srv.URL)
			rm, err := oauth.DiscoverResource(t.Context(), srv.Client(), srv.URL+"/mcp", challenge)
			switch {
			case tc.retryable:
				if !oauth.Retryable(err) {
					t.Fatalf("DiscoverResource = %v, want a *TransientError", err)
				}
				return
			case tc.want != nil:
				if !errors.Is(err, tc.want) {
					t.Fatalf("DiscoverResource = %v, want %v", err, tc.want)
				}
				return
			case err != nil:
				t.Fatalf("DiscoverResource: %v", err)
			}
			// The resource's authorization server is the real provider,
			// discovered in turn.
			m, err := oauth.Discover(t.Context(), p.HTTPClient(), rm.AuthorizationServers[0])
			if err != nil {
				t.Fatalf("Discover of %s: %v", rm.AuthorizationServers[0], err)
			}
			if m.Issuer != p.Issuer {
				t.Errorf("issuer %q, want %q", m.Issuer, p.Issuer)
			}
		})
	}
}
