package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// cluster is one store shared by any number of nodes, each a server of its
// own (registry, invoker, MCP door), with one write tool that counts its
// effects.
type cluster struct {
	store   toolplane.Store
	effects atomic.Int64
	// keyA and keyB are two agents' keys of org-1; keyOther an agent's of
	// org-2.
	keyA, keyB, keyOther string
	// input, when set, is the write tool's input schema on the nodes
	// started after (a contract changed by a deploy).
	input json.RawMessage
	// endpoint, when set, is the upstream endpoint the nodes started
	// after serve instead of /mcp.
	endpoint string
}

// sessionTouch is the nodes' touch interval: short, so a session ended on
// one node is refused on another within the test.
const sessionTouch = 20 * time.Millisecond

func newCluster(t *testing.T, backend string) *cluster {
	t.Helper()
	ctx := context.Background()
	c := &cluster{}
	switch backend {
	case "sqlite":
		c.store = sqlitetest.New(t)
	case "postgres":
		st := postgres.New(postgresPool(t))
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		c.store = st
	}
	mint := func(org, subject string) string {
		id, secret, _ := apikey.New(toolplane.CredentialAgent)
		if err := c.store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialAgent, Subject: subject,
			Tools: []string{"ledger.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return apikey.Key(id, secret)
	}
	c.keyA, c.keyB, c.keyOther = mint("org-1", "agent-a"), mint("org-1", "agent-b"), mint("org-2", "agent-a")
	return c
}

// postgresPool answers a pool on a fresh schema of the test database
// (pgtest.Schema, dropped when the test ends), or skips without one.
func postgresPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := pgtest.DSN(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", pgtest.DSNVariable, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgtest.Schema(t, dsn)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// node starts a node on the cluster's store and answers its URL and how to
// stop it as a kill would: every connection cut, nothing said to clients.
func (c *cluster) node(t *testing.T, opts ...func(*mcpserver.Server)) (string, func()) {
	t.Helper()
	hs := handler.NewRegistry()
	post, _ := handler.BindFunc("ledger.post", func(context.Context, handler.Call, any) (any, error) {
		return map[string]any{"effect": c.effects.Add(1)}, nil
	}, nil)
	_ = hs.Register(post)
	in := json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}},"required":["amount"],"additionalProperties":false}`)
	if c.input != nil {
		in = c.input
	}
	defs := []toolplane.Definition{{Name: "ledger.post", Kind: toolplane.KindInternal, Version: "1.0.0", Description: "Post an amount to the ledger.",
		Effect: toolplane.EffectWrite, Repeatable: new(bool), InputSchema: in, OutputSchema: json.RawMessage(`{"type":"object"}`),
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "ledger.post"}}}}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: c.store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	door := &mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, c.store), Version: "test", Sessions: c.store, SessionTouch: sessionTouch}
	for _, o := range opts {
		o(door)
	}
	h := door.Handler()
	if c.endpoint != "" {
		h = door.UpstreamHandler(c.endpoint)
	}
	srv := httptest.NewServer(h)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.CloseClientConnections()
			srv.Close()
		})
	}
	t.Cleanup(stop)
	return srv.URL, stop
}

// router sends every request to the node it currently points at, as a
// load balancer without sticky sessions may.
type router struct {
	key    string
	target atomic.Pointer[url.URL]
}

func (r *router) to(t *testing.T, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	r.target.Store(u)
}

func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	u := r.target.Load()
	req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, u.Host
	req.Header.Set("Authorization", "Bearer "+r.key)
	return http.DefaultTransport.RoundTrip(req)
}

// connect opens a session through rt with the Go SDK's client.
func connect(t *testing.T, rt *router) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://router/mcp", HTTPClient: &http.Client{Transport: rt},
		DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// post calls ledger.post for amount, with meta as the call's _meta.
func post(t *testing.T, cs *mcp.ClientSession, amount int, meta mcp.Meta) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ledger_post", Arguments: map[string]any{"amount": amount}, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool(%d): %v", amount, err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("CallTool(%d) = %+v", amount, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// raw sends one JSON-RPC message to base with key on session sid, and
// answers the status.
func raw(t *testing.T, base, key, sid, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

var backends = []string{"sqlite", "postgres"}

// A session opened on node A continues on node B (its run too: the same
// write in the same session is one effect), survives A being killed,
// continues on a node started after, and a DELETE on one node ends it on
// the node that still holds it.
func TestSessionContinuesAcrossNodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, backend string
		// stream answers every POST as an event stream (StreamResponses).
		stream bool
	}{
		{"sqlite", "sqlite", false},
		{"postgres", "postgres", false},
		{"sqlite streamed", "sqlite", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, tt.backend)
			mode := func(s *mcpserver.Server) { s.StreamResponses = tt.stream }
			urlA, stopA := c.node(t, mode)
			urlB, _ := c.node(t, mode)
			rt := &router{key: c.keyA}
			rt.to(t, urlA+"/mcp")
			cs := connect(t, rt)
			post(t, cs, 10, nil)

			rt.to(t, urlB+"/mcp")
			if got := post(t, cs, 10, nil); !strings.Contains(got, `"replayed":true`) || c.effects.Load() != 1 {
				t.Fatalf("the same write on node B = %s, %d effects; want the session's run to replay it", got, c.effects.Load())
			}
			post(t, cs, 20, nil)

			stopA()
			post(t, cs, 30, nil)

			// A node started after the session opened (a restart).
			urlC, _ := c.node(t, mode)
			rt.to(t, urlC+"/mcp")
			if got := post(t, cs, 30, nil); !strings.Contains(got, `"replayed":true`) {
				t.Fatalf("the same write on a restarted node = %s; want replayed", got)
			}
			if n := c.effects.Load(); n != 3 {
				t.Fatalf("effects = %d, want 3", n)
			}

			// DELETE on a node that never saw the session ends it on B and
			// C, which still hold it.
			sid := cs.ID()
			urlD, _ := c.node(t, mode)
			rt.to(t, urlD+"/mcp")
			if err := cs.Close(); err != nil {
				t.Fatalf("Close (DELETE on node D): %v", err)
			}
			if _, err := c.store.GetSession(t.Context(), "org-1", sid); !errors.Is(err, toolplane.ErrNotFound) {
				t.Fatalf("the stored session after DELETE: %v, want ErrNotFound", err)
			}
			time.Sleep(3 * sessionTouch)
			call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ledger_post","arguments":{"amount":40}}}`
			for _, u := range []string{urlB, urlC, urlD} {
				if code := raw(t, u+"/mcp", c.keyA, sid, call); code != http.StatusNotFound {
					t.Errorf("a call on the deleted session at %s = %d, want 404", u, code)
				}
			}
			if n := c.effects.Load(); n != 3 {
				t.Errorf("effects after the DELETE = %d, want 3", n)
			}
		})
	}
}

// A session belongs to the endpoint that opened it: presented at another
// endpoint of a node that does not hold it, it is not found there, and
// nothing runs.
func TestSessionStaysAtItsEndpointOnAnotherNode(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, backend)
			urlA, _ := c.node(t)
			rt := &router{key: c.keyA}
			rt.to(t, urlA+"/mcp")
			cs := connect(t, rt)
			post(t, cs, 10, nil)
			c.endpoint = "other"
			urlB, _ := c.node(t)
			call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ledger_post","arguments":{"amount":40}}}`
			if code := raw(t, urlB, c.keyA, cs.ID(), call); code != http.StatusNotFound {
				t.Errorf("the session of /mcp at another node's upstream endpoint = %d, want 404", code)
			}
			if n := c.effects.Load(); n != 1 {
				t.Errorf("effects = %d, want 1", n)
			}
			// Its own endpoint still continues it.
			post(t, cs, 20, nil)
		})
	}
}

// A session is bound to the credential that opened it, on every node:
// another agent's key is refused, another organization's finds nothing.
func TestSessionRefusesAnotherCredentialOnAnotherNode(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, backend)
			urlA, _ := c.node(t)
			urlB, _ := c.node(t)
			rt := &router{key: c.keyA}
			rt.to(t, urlA+"/mcp")
			cs := connect(t, rt)
			call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ledger_post","arguments":{"amount":40}}}`
			// Another organization's session is not found, on the node
			// that holds it as on any other; another credential of the
			// organization is refused as the SDK refuses it.
			tests := []struct {
				name         string
				key          string
				wantB, wantA int
			}{
				{"another agent of the organization", c.keyB, http.StatusForbidden, http.StatusForbidden},
				{"another organization", c.keyOther, http.StatusNotFound, http.StatusNotFound},
			}
			for _, tt := range tests {
				if code := raw(t, urlB+"/mcp", tt.key, cs.ID(), call); code != tt.wantB {
					t.Errorf("%s presenting the session at node B = %d, want %d", tt.name, code, tt.wantB)
				}
				if code := raw(t, urlA+"/mcp", tt.key, cs.ID(), call); code != tt.wantA {
					t.Errorf("%s presenting the session at node A = %d, want %d", tt.name, code, tt.wantA)
				}
			}
			if n := c.effects.Load(); n != 0 {
				t.Errorf("effects = %d, want 0", n)
			}
			// The owner still continues it on B.
			rt.to(t, urlB+"/mcp")
			post(t, cs, 1, nil)
		})
	}
}

// A client that starts a new session (after a node died) keeps its action
// with _meta's idempotency key or run: the retry answers the stored result,
// never a second effect; another agent's same key is its own action.
func TestMetaKeysKeepTheActionAcrossSessions(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, backend)
			urlA, stopA := c.node(t)
			urlB, _ := c.node(t)
			tests := []struct {
				name string
				meta mcp.Meta
			}{
				{"idempotency key", mcp.Meta{"toolplane/idempotency_key": "order-77"}},
				{"run", mcp.Meta{"toolplane/run_id": "run-77"}},
			}
			for i, tt := range tests {
				amount := 100 + i
				rt := &router{key: c.keyA}
				rt.to(t, urlA+"/mcp")
				first := connect(t, rt)
				post(t, first, amount, tt.meta)
				before := c.effects.Load()

				// A new session, on another node, retries.
				rtB := &router{key: c.keyA}
				rtB.to(t, urlB+"/mcp")
				retry := connect(t, rtB)
				if got := post(t, retry, amount, tt.meta); !strings.Contains(got, `"replayed":true`) || c.effects.Load() != before {
					t.Errorf("%s: the retry in a new session = %s, %d effects; want the stored result, %d", tt.name, got, c.effects.Load(), before)
				}
				// Another agent's same key is not the first agent's claim.
				other := &router{key: c.keyB}
				other.to(t, urlB+"/mcp")
				if got := post(t, connect(t, other), amount, tt.meta); strings.Contains(got, `"replayed":true`) || c.effects.Load() != before+1 {
					t.Errorf("%s: another agent's call = %s, %d effects; want its own effect", tt.name, got, c.effects.Load())
				}
			}
			stopA()
			// A value that is not a string is refused, not ignored.
			rt := &router{key: c.keyA}
			rt.to(t, urlB+"/mcp")
			res, err := connect(t, rt).CallTool(t.Context(), &mcp.CallToolParams{Name: "ledger_post", Arguments: map[string]any{"amount": 1},
				Meta: mcp.Meta{"toolplane/idempotency_key": 7}})
			if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "invalid_input") {
				t.Errorf("a numeric idempotency key = %+v, %v; want invalid_input", res, err)
			}
		})
	}
}

// A client that reconnects and retries its write (the same _meta key) is
// answered the stored result each time without spending its request
// budget: the MCP door charges repeats to the retry budget, as REST does.
func TestMCPRetriesSpendTheRetryBudget(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "sqlite")
	limiter := ratelimit.New(8, 1000*time.Hour) // one window for the whole test
	u, _ := c.node(t, func(s *mcpserver.Server) { s.Door.Limiter = limiter })
	rt := &router{key: c.keyA}
	rt.to(t, u+"/mcp")
	cs := connect(t, rt) // initialize and initialized: two requests
	key := mcp.Meta{"toolplane/idempotency_key": "k-1"}
	post(t, cs, 5, key)
	id, _, _ := apikey.Parse(c.keyA)
	before := limiter.Allow(id, time.Now()).Remaining // spends one
	// Eight retries: past the budget (8) if each cost a request.
	for i := range 8 {
		if got := post(t, cs, 5, key); !strings.Contains(got, `"replayed":true`) {
			t.Fatalf("retry %d = %s, want the stored result", i+1, got)
		}
	}
	if n := c.effects.Load(); n != 1 {
		t.Fatalf("effects = %d, want 1", n)
	}
	// The request budget is as the first call left it: the next request
	// spends one more, no more.
	if d := limiter.Allow(id, time.Now()); d.Remaining != before-1 {
		t.Errorf("remaining = %d, want %d", d.Remaining, before-1)
	}
}

// The TypeScript SDK's client (from npm) opens a session on node A, which
// is then killed, and continues it on node B, whose DELETE ends it. It runs
// where the SDK is installed beside server-everything
// (TOOLPLANE_TEST_EVERYTHING, see the project's CI notes).
func TestTypeScriptClientContinuesOnAnotherNode(t *testing.T) {
	t.Parallel()
	everything := os.Getenv("TOOLPLANE_TEST_EVERYTHING")
	if everything == "" {
		t.Skip("set TOOLPLANE_TEST_EVERYTHING (the SDK is installed beside it) to run the TypeScript client")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	modules := everything[:strings.Index(everything, "node_modules")+len("node_modules")]
	c := newCluster(t, "sqlite")
	urlA, stopA := c.node(t)
	urlB, _ := c.node(t)
	script, _ := filepath.Abs("testdata/ts_client.cjs")
	cmd := exec.CommandContext(t.Context(), node, script, urlA+"/mcp", urlB+"/mcp", c.keyA)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "opened ") {
		cmd.Wait()
		t.Fatalf("the client did not open a session: %q; stderr: %s", lines.Text(), stderr.String())
	}
	stopA()
	io.WriteString(stdin, "go\n")
	if !lines.Scan() {
		cmd.Wait()
		t.Fatalf("the client said nothing after node A stopped; stderr: %s", stderr.String())
	}
	var got struct{ First, Again, Second, Session string }
	if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(got.Again, `"replayed":true`) || strings.Contains(got.Second, `"replayed"`) || c.effects.Load() != 2 {
		t.Errorf("on node B: again %s, second %s, %d effects; want the first replayed, the second run, 2 effects", got.Again, got.Second, c.effects.Load())
	}
	if _, err := c.store.GetSession(t.Context(), "org-1", got.Session); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("the stored session after the client's DELETE on node B: %v, want ErrNotFound", err)
	}
}

// The contracts a session froze at tools/list hold on every node: a node
// whose tool changed since (a deploy) answers tool_changed to the session's
// call instead of running a call shaped for the old contract.
func TestSessionContractsHoldOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "sqlite")
	urlA, _ := c.node(t)
	c.input = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"},"memo":{"type":"string"}},"required":["amount"],"additionalProperties":false}`)
	urlB, _ := c.node(t)
	rt := &router{key: c.keyA}
	rt.to(t, urlA+"/mcp")
	cs := connect(t, rt)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	rt.to(t, urlB+"/mcp")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ledger_post", Arguments: map[string]any{"amount": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "tool_changed") || c.effects.Load() != 0 {
		t.Fatalf("a call on node B after the contract changed = %+v, %d effects; want tool_changed", res.Content[0], c.effects.Load())
	}
	// A session that lists again on B is shown the new contract, and calls.
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	post(t, cs, 1, nil)
}

// Expiry is the deployment's, not one node's: a session in use on node B
// lives on though node A, which opened it, saw nothing of it for longer
// than the idle time; a session nobody used for the idle time is gone on
// every node.
func TestSessionExpiryAcrossNodes(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded machine keeps to the steps' order.
	const idle = 1500 * time.Millisecond
	c := newCluster(t, "sqlite")
	short := func(s *mcpserver.Server) { s.SessionIdle = idle }
	urlA, _ := c.node(t, short)
	urlB, _ := c.node(t, short)
	rt := &router{key: c.keyA}
	rt.to(t, urlA+"/mcp")
	cs := connect(t, rt)
	rt.to(t, urlB+"/mcp")
	for i := range 12 {
		post(t, cs, i, nil)
		time.Sleep(idle / 8)
	}
	rt.to(t, urlA+"/mcp")
	post(t, cs, 100, nil)

	time.Sleep(idle + idle/2)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ledger_post","arguments":{"amount":1}}}`
	for _, u := range []string{urlB, urlA} {
		if code := raw(t, u+"/mcp", c.keyA, cs.ID(), call); code != http.StatusNotFound {
			t.Errorf("a call at %s on a session idle past its time = %d, want 404", u, code)
		}
	}
}

// A session restored on a node counts against that node's caps as one
// opened there does: a key at its cap on node B cannot bring its session
// of node A to B, and B answers with the cap's refusal.
func TestRestoredSessionCountsAgainstTheCaps(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "sqlite")
	one := func(s *mcpserver.Server) { s.MaxSessionsPerKey = 1 }
	urlA, _ := c.node(t, one)
	urlB, _ := c.node(t, one)
	rtA := &router{key: c.keyA}
	rtA.to(t, urlA+"/mcp")
	onA := connect(t, rtA)
	rtB := &router{key: c.keyA}
	rtB.to(t, urlB+"/mcp")
	connect(t, rtB) // B now holds the key's one session.
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ledger_post","arguments":{"amount":40}}}`
	if code := raw(t, urlB+"/mcp", c.keyA, onA.ID(), call); code != http.StatusTooManyRequests {
		t.Errorf("the key's session of A presented at B (at its cap) = %d, want %d", code, http.StatusTooManyRequests)
	}
	if n := c.effects.Load(); n != 0 {
		t.Errorf("effects = %d, want 0", n)
	}
	// A still serves it.
	post(t, onA, 1, nil)
}

// A node that restored a session learns the contracts its client froze
// later through another node, at its next touch: a call there on a tool
// whose contract differs from the one listed answers tool_changed.
func TestRestoredSessionLearnsContractsFrozenElsewhere(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, backend)
			urlA, _ := c.node(t)
			// B runs a changed contract of ledger.post.
			c.input = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"},"memo":{"type":"string"}},"required":["amount"],"additionalProperties":false}`)
			urlB, _ := c.node(t)
			rt := &router{key: c.keyA}
			rt.to(t, urlA+"/mcp")
			cs := connect(t, rt)
			// B restores the session before the client lists anything.
			rt.to(t, urlB+"/mcp")
			if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "nothing", Arguments: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			// The client lists on A, which freezes A's contract.
			rt.to(t, urlA+"/mcp")
			if _, err := cs.ListTools(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			// Past B's touch interval, the call on B holds to it.
			time.Sleep(3 * sessionTouch)
			rt.to(t, urlB+"/mcp")
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ledger_post", Arguments: map[string]any{"amount": 1}})
			if err != nil {
				t.Fatal(err)
			}
			if txt := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(txt, string(toolplane.CodeToolChanged)) {
				t.Errorf("a call on B after the client listed the old contract on A = %.200s, want tool_changed", txt)
			}
			if n := c.effects.Load(); n != 0 {
				t.Errorf("effects = %d, want 0", n)
			}
		})
	}
}
