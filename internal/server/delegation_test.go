package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// testIssuer is an identity provider on loopback: its JWKS served over
// HTTP, its tokens signed with its key.
type testIssuer struct {
	key *ecdsa.PrivateKey
	url string
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}})
	}))
	t.Cleanup(srv.Close)
	return &testIssuer{key: k, url: srv.URL}
}

// delegated answers a token the issuer gave agent to act for person, with
// the person's groups.
func (is *testIssuer) delegated(t *testing.T, agent, person string, groups ...string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{"iss": "https://idp.test", "aud": "toolplane", "sub": person, "org": DefaultOrganization,
		"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "person", "act": map[string]any{"sub": agent},
		"groups": groups, "manager": "kim"}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// An agent acting for a person may do only what both may, on either door,
// on either store: a person without the right blocks the agent's call, a
// person with it lets it through, an agent without the right blocks
// whatever the person may; a token the person's identity provider gave
// the agent acts for its subject, the groups its claims name standing for
// them; on_behalf_of from a key that may not act for users is refused.
// Each call's audit event names the person.
func TestDelegatedAuthorityThroughBothDoors(t *testing.T) {
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
			is := newTestIssuer(t)
			cfg := Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true,
				JWTIssuer: "https://idp.test", JWTAudience: "toolplane", JWTJWKSURL: is.url, JWTClaims: jwtauth.Claims{Groups: "groups", Manager: "manager"}}
			s, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			t.Cleanup(func() { stop(); <-ran })
			base := "http://" + s.Addr()
			creds := readCreds(t, dir)
			admin, plain := creds["TOOLPLANE_ADMIN_KEY"], creds["TOOLPLANE_DEMO_AGENT_KEY"]

			mint := func(subject string) string {
				status, got := post(t, base, "/v1/keys", admin, `{"kind":"agent","subject":"`+subject+`","roles":["act_for_users"]}`)
				var k struct {
					Key string `json:"key"`
				}
				if json.Unmarshal([]byte(got), &k); status != http.StatusCreated || k.Key == "" {
					t.Fatalf("minting a key for %s: %d %s", subject, status, got)
				}
				return k.Key
			}
			grant := func(body string) {
				if status, got := post(t, base, "/v1/grants", admin, body); status != http.StatusCreated {
					t.Fatalf("grant %s: %d %s", body, status, got)
				}
			}
			desk := mint("demo-agent")
			narrow := mint("agent-narrow")
			grant(`{"agent_id":"agent-narrow","pattern":"demo.search_tickets"}`)
			grant(`{"user_id":"sam","pattern":"demo.search_tickets"}`)
			grant(`{"user_id":"sam","pattern":"demo.add_note"}`)
			grant(`{"group":"support","pattern":"demo.analyze_text"}`)

			type want struct {
				status int
				code   string // the result's error code, "" for a success
			}
			search := `{"query":"cracked"}`
			note := `{"ticket_id":"t-1001","text":"called the customer"}`
			analyze := `{"text":"one short text."}`
			tests := []struct {
				name, key, tool, args, forWhom string
				want                           want
			}{
				{"the person and the agent may", desk, "demo.search_tickets", search, "sam", want{200, ""}},
				{"the person may not", desk, "demo.search_tickets", search, "lee", want{200, "denied"}},
				{"the person is not granted this tool", desk, "demo.analyze_text", analyze, "sam", want{200, "denied"}},
				// MCP does not show agent-narrow demo.add_note at all.
				{"the agent may not, the person may", narrow, "demo.add_note", note, "sam", want{200, "denied"}},
				{"the narrow agent and the person may", narrow, "demo.search_tickets", search, "sam", want{200, ""}},
				{"a key that may not act for users", plain, "demo.search_tickets", search, "sam", want{403, "denied"}},
				{"the agent alone", plain, "demo.search_tickets", search, "", want{200, ""}},
				{"a token for sam, by the IdP", is.delegated(t, "demo-agent", "sam"), "demo.search_tickets", search, "", want{200, ""}},
				{"a token for lee, not granted", is.delegated(t, "demo-agent", "lee"), "demo.search_tickets", search, "", want{200, "denied"}},
				{"a token for lee, whose group is granted", is.delegated(t, "demo-agent", "lee", "support"), "demo.analyze_text", analyze, "", want{200, ""}},
				{"a token for lee naming another person", is.delegated(t, "demo-agent", "lee", "support"), "demo.analyze_text", analyze, "sam", want{403, "denied"}},
			}
			for i, tt := range tests {
				run := name + "-run-" + string(rune('a'+i))
				// REST.
				body := `{"arguments":` + tt.args + `,"run_id":"` + run + `"`
				if tt.forWhom != "" {
					body += `,"on_behalf_of":"` + tt.forWhom + `"`
				}
				status, got := post(t, base, "/v1/tools/"+tt.tool+"/invoke", tt.key, body+"}")
				if status != tt.want.status || (tt.want.code == "") != !strings.Contains(got, `"code"`) || !strings.Contains(got, tt.want.code) {
					t.Errorf("REST %s: %d %s; want %d %q", tt.name, status, got, tt.want.status, tt.want.code)
				}
				// MCP.
				client := mcp.NewClient(&mcp.Implementation{Name: "delegation", Version: "1"}, nil)
				cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{tt.key}}, MaxRetries: -1}, nil)
				if err != nil {
					cancel()
					t.Fatalf("MCP %s: %v", tt.name, err)
				}
				meta := mcp.Meta{"toolplane/run_id": run + "-mcp"}
				if tt.forWhom != "" {
					meta["toolplane/on_behalf_of"] = tt.forWhom
				}
				var args map[string]any
				_ = json.Unmarshal([]byte(tt.args), &args)
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: strings.ReplaceAll(tt.tool, ".", "_"), Arguments: args, Meta: meta})
				cancel()
				cs.Close()
				if err != nil {
					t.Fatalf("MCP %s: %v", tt.name, err)
				}
				raw, _ := json.Marshal(res)
				refused := tt.want.status != 200 || tt.want.code != ""
				code := tt.want.code
				if tt.key == narrow && tt.tool == "demo.add_note" {
					code = "tool_unavailable" // the MCP door names only the tools it showed
				}
				if res.IsError != refused || (code != "" && !strings.Contains(string(raw), code)) {
					t.Errorf("MCP %s: %s; want refused %v %q", tt.name, raw, refused, tt.want.code)
				}
			}

			// The audit trail names the person each decided call acted for.
			// The events of calls that changed nothing are stored by the
			// background writer after the call answered: wait for them.
			b, err := backend.Open(context.Background(), cfg.Database)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			wanted := []string{
				"sam/demo-agent/demo.search_tickets/ok", "lee/demo-agent/demo.search_tickets/denied",
				"sam/agent-narrow/demo.add_note/denied", "lee/demo-agent/demo.analyze_text/ok",
			}
			seen := map[string]bool{}
			awaitAudit(t, func() []toolplane.AuditEvent {
				events, _, err := b.Store.ListAudit(context.Background(), DefaultOrganization, toolplane.AuditFilter{}, "", 200)
				if err != nil {
					t.Fatal(err)
				}
				return events
			}, func(events []toolplane.AuditEvent) bool {
				clear(seen)
				for _, e := range events {
					seen[e.UserID+"/"+e.AgentID+"/"+e.Tool+"/"+e.Outcome] = true
				}
				return !slices.ContainsFunc(wanted, func(k string) bool { return !seen[k] })
			})
			for _, k := range wanted {
				if !seen[k] {
					t.Errorf("no audit event %s among %v", k, seen)
				}
			}
		})
	}
}
