package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/toolplane/toolplane/postgres/pgtest"
)

// nodeRouter sends each request to the node it points at, with the token
// it holds: a load balancer without sticky sessions, in front of a client
// that swaps its token after a step-up.
type nodeRouter struct {
	target atomic.Pointer[url.URL]
	token  atomic.Pointer[string]
}

func (r *nodeRouter) to(base, token string) {
	u, _ := url.Parse(base)
	r.target.Store(u)
	r.token.Store(&token)
}

func (r *nodeRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	u := r.target.Load()
	req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, u.Host
	req.Header.Set("Authorization", "Bearer "+*r.token.Load())
	return http.DefaultTransport.RoundTrip(req)
}

// TestStepUpAcrossNodes: two nodes on one PostgreSQL schema, one public
// URL. A client's token consented to one tool opens an MCP session on
// node A and calls another tool: 403 insufficient_scope naming it. The
// person consents again, through node B, to both tools; the client goes on
// in the same session on node B with the new token, and the call runs
// there. The narrow token stays narrow on either node.
func TestStepUpAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	dir := t.TempDir()
	const public = "http://127.0.0.1"
	start := func() string {
		s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: dsn, DataDir: dir, Demo: true, PublicURL: public})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- s.Run(ctx) }()
		t.Cleanup(func() { stop(); <-ran })
		return "http://" + s.Addr()
	}
	nodeA := start()
	nodeB := start()
	admin := readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]
	status, got := post(t, nodeA, "/v1/keys", admin, `{"kind":"person","subject":"sam"}`)
	var k struct {
		Key string `json:"key"`
	}
	if json.Unmarshal([]byte(got), &k); status != http.StatusCreated || k.Key == "" {
		t.Fatalf("sam's key: %d %s", status, got)
	}
	for _, g := range []string{`{"agent_id":"oauth-clients","pattern":"demo.*"}`, `{"user_id":"sam","pattern":"demo.*"}`} {
		if status, got := post(t, nodeA, "/v1/grants", admin, g); status != http.StatusCreated {
			t.Fatalf("grant %s: %d %s", g, status, got)
		}
	}

	// A client registers on node A.
	const callback = "http://127.0.0.1:33418/callback"
	resp, err := http.Post(nodeA+"/oauth/register", "application/json",
		strings.NewReader(`{"client_name":"step-up e2e","redirect_uris":["`+callback+`"],"token_endpoint_auth_method":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("register: %d", resp.StatusCode)
	}
	// authorize sends sam's browser through sign-in and consent on node
	// for scope, and trades the code on the same node.
	authorize := func(node, scope string) string {
		t.Helper()
		conf := oauth2.Config{ClientID: reg.ClientID, RedirectURL: callback, Scopes: strings.Fields(scope),
			Endpoint: oauth2.Endpoint{AuthURL: node + "/oauth/authorize", TokenURL: node + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
		verifier := oauth2.GenerateVerifier()
		authURL := conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", public+"/mcp"))
		res, err := personBrowser(t, node, k.Key)(t.Context(), &auth.AuthorizationArgs{URL: authURL})
		if err != nil {
			t.Fatalf("consent on %s for %q: %v", node, scope, err)
		}
		tok, err := conf.Exchange(t.Context(), res.Code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", public+"/mcp"))
		if err != nil {
			t.Fatalf("exchange on %s: %v", node, err)
		}
		return tok.AccessToken
	}
	narrow := authorize(nodeA, "tool:demo.search_tickets")

	rt := &nodeRouter{}
	rt.to(nodeA, narrow)
	cctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "step-up", Version: "1"}, nil).Connect(cctx,
		&mcp.StreamableClientTransport{Endpoint: "http://router/mcp", HTTPClient: &http.Client{Transport: rt}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect on node A: %v", err)
	}
	defer cs.Close()
	if r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: map[string]any{"query": "cracked"}}); err != nil || r.IsError {
		t.Fatalf("the consented tool on node A: %+v %v", r, err)
	}
	note := &mcp.CallToolParams{Name: "demo_add_note", Arguments: map[string]any{"ticket_id": "t-1001", "text": "Shipped."},
		Meta: mcp.Meta{"toolplane/idempotency_key": "step-up-note"}}
	if r, err := cs.CallTool(cctx, note); err == nil {
		t.Fatalf("a tool outside the consent on node A: %+v, want the call refused", r)
	} else if !strings.Contains(err.Error(), "tool:demo.add_note") {
		t.Fatalf("node A's refusal %q does not name the scope", err)
	}
	sid := cs.ID()
	// The challenge as it is sent, on either node: the narrow token
	// stays narrow wherever it is presented.
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"demo_add_note","arguments":{"ticket_id":"t-1001","text":"x"},"_meta":{"toolplane/idempotency_key":"step-up-raw"}}}`
	for _, node := range []string{nodeA, nodeB} {
		status, challenge := mcpPost(t, node, narrow, sid, call)
		if status != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope"`) || !strings.Contains(challenge, `scope="tool:demo.add_note"`) ||
			!strings.Contains(challenge, `resource_metadata="`+public+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Fatalf("the narrow token calling demo.add_note on %s: %d %q", node, status, challenge)
		}
	}

	// Step-up: sam consents again, through node B, to both tools; the
	// client goes on in its session on node B with the new token.
	wider := authorize(nodeB, "tool:demo.search_tickets tool:demo.add_note")
	rt.to(nodeB, wider)
	if r, err := cs.CallTool(cctx, note); err != nil || r.IsError {
		raw, _ := json.Marshal(r)
		t.Fatalf("after the step-up, on node B: %s %v", raw, err)
	}
	if cs.ID() != sid {
		t.Fatalf("the session changed from %s to %s", sid, cs.ID())
	}
	listed, err := cs.ListTools(cctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range listed.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "demo_add_note") {
		t.Fatalf("after the step-up node B lists %v in the session, want demo_add_note", names)
	}
	// And back on node A, which opened the session, the wider token goes
	// on in it too.
	rt.to(nodeA, wider)
	if r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: map[string]any{"query": "cracked"}}); err != nil || r.IsError {
		t.Fatalf("the wider token in the session on node A: %+v %v", r, err)
	}
}

// mcpPost sends one JSON-RPC message to node's /mcp with token on
// session sid, and answers the status and the WWW-Authenticate header.
func mcpPost(t *testing.T, node, token, sid, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, node+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}
