package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// personBrowser is a person's browser on base: it signs in with the
// person's key when sent to the sign-in page, allows on the consent page,
// and answers the redirect to the client, which it does not follow.
func personBrowser(t *testing.T, base, key string) auth.AuthorizationCodeFetcher {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if "http://"+req.URL.Host != base {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	do := func(method, u string, form url.Values) (*http.Response, string, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, u, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, string(raw), nil
	}
	hidden := func(page string) url.Values {
		v := url.Values{}
		for _, m := range hiddenRE.FindAllStringSubmatch(page, -1) {
			v.Add(m[1], html.UnescapeString(m[2]))
		}
		return v
	}
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		_, page, err := do("GET", args.URL, nil)
		if err != nil {
			return nil, err
		}
		if strings.Contains(page, "personal API key") {
			form := hidden(page)
			form.Set("key", key)
			if _, page, err = do("POST", base+"/signin/key", form); err != nil {
				return nil, err
			}
		}
		if !strings.Contains(page, `value="allow"`) {
			return nil, fmt.Errorf("not the consent page: %s", page)
		}
		form := hidden(page)
		form.Set("decision", "allow")
		resp, page, err := do("POST", base+"/oauth/authorize", form)
		if err != nil {
			return nil, err
		}
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || loc.Query().Get("code") == "" {
			return nil, fmt.Errorf("consent answered %d %q: %s", resp.StatusCode, resp.Header.Get("Location"), page)
		}
		q := loc.Query()
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

// TestOAuthClientEndToEnd: the go-sdk's MCP client, given nothing but the
// server's /mcp URL, discovers the authorization server, registers itself,
// sends sam through sign-in (his person key) and consent, lists the tools
// and calls one acting for sam; the audit trail names both; after sam
// revokes the consent, the next call is refused and the client is sent
// back to consent. On each store (two nodes over one database are
// authserver's TestConsentRevocation and TestRefreshRotation).
func TestOAuthClientEndToEnd(t *testing.T) {
	t.Parallel()
	backends := map[string]func(t *testing.T, dir string) string{
		"sqlite": func(_ *testing.T, dir string) string { return filepath.Join(dir, "toolplane.db") },
	}
	if _, ok := pgtest.LookupDSN(); ok {
		backends["postgres"] = func(t *testing.T, _ string) string { return pgtest.SchemaDSN(t, pgtest.DSN(t)) }
	}
	for name, database := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true}
			s, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			t.Cleanup(func() { stop(); <-ran })
			base := "http://" + s.Addr()
			admin := readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]
			status, got := post(t, base, "/v1/keys", admin, `{"kind":"person","subject":"sam"}`)
			var k struct {
				Key string `json:"key"`
			}
			if json.Unmarshal([]byte(got), &k); status != http.StatusCreated || k.Key == "" {
				t.Fatalf("sam's key: %d %s", status, got)
			}
			for _, g := range []string{`{"agent_id":"oauth-clients","pattern":"demo.search_tickets"}`, `{"user_id":"sam","pattern":"demo.search_tickets"}`} {
				if status, got := post(t, base, "/v1/grants", admin, g); status != http.StatusCreated {
					t.Fatalf("grant %s: %d %s", g, status, got)
				}
			}

			var (
				asked    atomic.Int32
				declined atomic.Bool
				browse   = personBrowser(t, base, k.Key)
			)
			handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
				DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
					ClientName: "go-sdk e2e", RedirectURIs: []string{"http://127.0.0.1:33418/callback"}, GrantTypes: []string{"authorization_code", "refresh_token"},
					TokenEndpointAuthMethod: "none"}},
				RedirectURL: "http://127.0.0.1:33418/callback",
				AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
					asked.Add(1)
					if declined.Load() {
						return nil, errors.New("sam declines")
					}
					return browse(ctx, args)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "oauth-e2e", Version: "1"}, nil)
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", OAuthHandler: handler, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatalf("connect by URL alone: %v", err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(cctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Contains(names, "demo_search_tickets") || slices.Contains(names, "demo_add_note") {
				t.Fatalf("tools shown to the client's agent: %v", names)
			}
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: map[string]any{"query": "cracked"}})
			if err != nil || res.IsError {
				raw, _ := json.Marshal(res)
				t.Fatalf("call acting for sam: %v %s", err, raw)
			}

			b, err := backend.Open(context.Background(), cfg.Database)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			events := awaitAudit(t, func() []toolplane.AuditEvent {
				ev, _, err := b.Store.ListAudit(context.Background(), DefaultOrganization, toolplane.AuditFilter{}, "", 200)
				if err != nil {
					t.Fatal(err)
				}
				return ev
			}, func(ev []toolplane.AuditEvent) bool {
				return slices.ContainsFunc(ev, func(e toolplane.AuditEvent) bool { return e.Tool == "demo.search_tickets" && e.Outcome == "ok" })
			})
			for _, e := range events {
				if e.Tool == "demo.search_tickets" && (e.AgentID != "oauth-clients" || e.UserID != "sam" || !strings.HasPrefix(e.KeyID, "oauth:")) {
					t.Fatalf("the call's audit event: agent %q user %q key %q", e.AgentID, e.UserID, e.KeyID)
				}
			}

			status, got = send2(t, "GET", base+"/v1/oauth/consents", k.Key)
			var consents struct {
				Consents []struct {
					ID string `json:"id"`
				} `json:"consents"`
			}
			if json.Unmarshal([]byte(got), &consents); status != http.StatusOK || len(consents.Consents) != 1 {
				t.Fatalf("sam's consents: %d %s", status, got)
			}
			if status, got := post(t, base, "/v1/oauth/consents/"+consents.Consents[0].ID+"/revoke", k.Key, ""); status != http.StatusOK {
				t.Fatalf("revoke: %d %s", status, got)
			}
			// The client's token no longer authenticates: the client starts
			// the flow again, and sam, at the browser, declines.
			declined.Store(true)
			if _, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: map[string]any{"query": "cracked"}}); err == nil {
				t.Fatal("a call after the consent was revoked succeeded")
			}
			if asked.Load() != 2 {
				t.Fatalf("the browser was sent to consent %d times, want 2 (the first connection, then after the revocation's 401)", asked.Load())
			}
		})
	}
}

// send2 sends method to u with key and answers the status and body.
func send2(t *testing.T, method, u, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}
