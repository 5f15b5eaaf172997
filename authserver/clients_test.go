package authserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authserver"
	"github.com/toolplane/toolplane/egress"
)

// TestRegistrationFlood: registrations per client address are bounded.
func TestRegistrationFlood(t *testing.T) {
	forEach(t, func(c *authserver.Config) { c.RegistrationsPerHour = 3 }, func(t *testing.T, w *world) {
		for i := range 3 {
			if _, status := w.register(0, redirect); status != http.StatusCreated {
				t.Fatalf("registration %d: %d", i, status)
			}
		}
		if _, status := w.register(0, redirect); status != http.StatusTooManyRequests {
			t.Fatalf("the fourth registration in an hour: %d, want 429", status)
		}
	})
}

// TestRegistrationRules: what a registration may ask, and the operator's
// allow-list and off switch.
func TestRegistrationRules(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		for _, uris := range [][]string{nil, {"http://evil.example/cb"}, {"javascript:alert(1)"}, {"https://a.example/cb#frag"}, {"cb"}} {
			if _, status := w.register(0, uris...); status != http.StatusBadRequest {
				t.Errorf("redirect_uris %q: %d, want 400", uris, status)
			}
		}
		for _, body := range []string{`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`,
			`{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}`, `not json`} {
			resp, err := http.Post(w.url(0, "/oauth/register"), "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: %d, want 400", body, resp.StatusCode)
			}
		}
	})
	t.Run("allowlist", func(t *testing.T) {
		forEach(t, func(c *authserver.Config) {
			c.Registration, c.RedirectAllow = authserver.RegistrationAllowlist, []string{"https://claude.ai/api/mcp/auth_callback", "http://127.0.0.1:33418/*"}
		}, func(t *testing.T, w *world) {
			if _, status := w.register(0, "https://claude.ai/api/mcp/auth_callback", redirect); status != http.StatusCreated {
				t.Fatalf("listed URIs: %d", status)
			}
			if _, status := w.register(0, "https://claude.ai/api/mcp/auth_callback", "https://other.example/cb"); status != http.StatusBadRequest {
				t.Fatalf("one unlisted URI: %d", status)
			}
		})
	})
	t.Run("off", func(t *testing.T) {
		forEach(t, func(c *authserver.Config) { c.Registration = authserver.RegistrationOff }, func(t *testing.T, w *world) {
			if _, status := w.register(0, redirect); status != http.StatusForbidden {
				t.Fatalf("registration when off: %d", status)
			}
			var md authserver.Metadata
			resp, err := http.Get(w.url(0, authserver.MetadataPath))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			json.NewDecoder(resp.Body).Decode(&md)
			if md.RegistrationEndpoint != "" || !md.ClientIDMetadataDocumentSupported {
				t.Fatalf("metadata when registration is off: %+v", md)
			}
		})
	})
}

// TestMetadata: the RFC 8414 document names this issuer's endpoints and
// S256 only; /.well-known/openid-configuration answers the same.
func TestMetadata(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		for _, path := range []string{authserver.MetadataPath, authserver.OpenIDPath} {
			var md authserver.Metadata
			resp, err := http.Get(w.url(1, path))
			if err != nil {
				t.Fatal(err)
			}
			json.NewDecoder(resp.Body).Decode(&md)
			resp.Body.Close()
			if md.Issuer != w.base || md.TokenEndpoint != w.base+"/oauth/token" || md.RegistrationEndpoint != w.base+"/oauth/register" ||
				len(md.CodeChallengeMethodsSupported) != 1 || md.CodeChallengeMethodsSupported[0] != "S256" || md.JWKSURI != w.base+"/oauth/jwks" {
				t.Fatalf("%s: %+v", path, md)
			}
		}
		resp, err := http.Get(w.url(1, "/oauth/jwks"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var set struct {
			Keys []map[string]any `json:"keys"`
		}
		json.NewDecoder(resp.Body).Decode(&set)
		if len(set.Keys) == 0 || set.Keys[0]["d"] != nil || set.Keys[0]["alg"] != "ES256" {
			t.Fatalf("jwks %+v", set)
		}
	})
}

// documentServer serves client metadata documents over TLS on loopback:
// /good, /slow, /huge, /liar (another client_id), /unlisted (a redirect
// the allow-list refuses is tested elsewhere).
func documentServer(t *testing.T) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := map[string]any{"client_id": srv.URL + r.URL.Path, "client_name": "Doc client", "redirect_uris": []string{redirect}}
		switch r.URL.Path {
		case "/slow":
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
				return
			}
		case "/huge":
			doc["padding"] = strings.Repeat("x", 200<<10)
		case "/liar":
			doc["client_id"] = srv.URL + "/good"
		case "/http-redirect":
			doc["redirect_uris"] = []string{"http://evil.example/cb"}
		case "/good", "/another":
		default:
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// loopbackEgress admits 127.0.0.1 and trusts srv's certificate: the
// operator's rule a test document server needs.
func loopbackEgress(t *testing.T, srv *httptest.Server) *egress.Policy {
	p, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: []string{"127.0.0.1/32"}}, egress.AnyHost())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	p.Transport().TLSClientConfig = &tls.Config{RootCAs: pool}
	return p
}

// TestMetadataDocument: a client_id that is an https URL is read through
// the egress rules, bounded in time and size, and must name itself.
func TestMetadataDocument(t *testing.T) {
	docs := documentServer(t)
	forEach(t, func(c *authserver.Config) {
		c.Egress, c.DocumentTimeout, c.DocumentMaxBytes = loopbackEgress(t, docs), 500*time.Millisecond, 64<<10
	}, func(t *testing.T, w *world) {
		c := w.clientOf(docs.URL + "/good")
		b := w.browser()
		tok, err := c.exchange(0, c.authorize(b, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := w.call(1, "/mcp", tok.AccessToken); got == nil || got.ClientID != docs.URL+"/good" {
			t.Fatalf("a document client's token: %+v", got)
		}
		for _, path := range []string{"/slow", "/huge", "/liar", "/http-redirect", "/missing"} {
			start := time.Now()
			p := b.get(w.clientOf(docs.URL + path).authURL())
			if p.status != http.StatusBadRequest || p.location != "" {
				t.Errorf("%s: %d to %q, want a page", path, p.status, p.location)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("%s took %v", path, took)
			}
		}
	})
	t.Run("private", func(t *testing.T) {
		// The default rules: any host, never a private or loopback address.
		forEach(t, nil, func(t *testing.T, w *world) {
			p := w.browser().get(w.clientOf(docs.URL + "/good").authURL())
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, "may not reach") {
				t.Fatalf("a document on a loopback address: %d %s", p.status, p.body)
			}
		})
	})
}

// TestAuthorizeRepeated: a repeated parameter is refused (RFC 6749 3.1).
func TestAuthorizeRepeated(t *testing.T) {
	forEach(t, nil, func(t *testing.T, w *world) {
		c := w.newClient()
		p := w.browser().get(c.authURL() + "&client_id=" + c.conf.ClientID)
		if p.status != http.StatusBadRequest {
			t.Fatalf("repeated client_id: %d", p.status)
		}
	})
}
