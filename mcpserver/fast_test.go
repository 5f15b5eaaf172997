package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

type withKey struct {
	key  string
	next http.RoundTripper
}

func (b withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// fastFixture is a door with one read tool and two agents' keys.
type fastFixture struct {
	s          *Server
	url        string
	keyA, keyB string
	store      *sqlite.Store
}

func newFastFixture(t testing.TB, idle time.Duration) *fastFixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	f := &fastFixture{store: store}
	hs := handler.NewRegistry()
	lookup, _ := handler.BindFunc("crm.lookup", func(context.Context, handler.Call, any) (any, error) {
		return map[string]any{"name": "Ada", "visits": 3}, nil
	}, nil)
	_ = hs.Register(lookup)
	obj := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`)
	out := json.RawMessage(`{"type":"object"}`)
	defs := []toolplane.Definition{
		{Name: "crm.lookup", Kind: toolplane.KindInternal, Version: "1.0.0", Description: "Find a customer by id.", Effect: toolplane.EffectRead,
			InputSchema: obj, OutputSchema: out, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "crm.lookup"}}},
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(subject string) string {
		id, secret, _ := apikey.New(toolplane.CredentialAgent)
		if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: subject,
			Tools: []string{"crm.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return apikey.Key(id, secret)
	}
	f.keyA, f.keyB = mint("agent-a"), mint("agent-b")
	f.s = &Server{Door: NewTestDoor(iv, reg, store), Log: quiet, Version: "test", SessionIdle: idle}
	srv := httptest.NewServer(f.s.Handler())
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fastFixture) connect(t testing.TB) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.url,
		HTTPClient: &http.Client{Transport: withKey{f.keyA, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return cs
}

// post sends one raw JSON-RPC message on session sid with key.
func (f *fastFixture) post(t testing.TB, key, sid, version, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFastPathAnswersCallsAsTheSDKWould(t *testing.T) {
	t.Parallel()
	f := newFastFixture(t, 0)
	cs := f.connect(t)
	for range 3 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": "c-1"}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		if sc["name"] != "Ada" || sc["visits"] != float64(3) {
			t.Fatalf("structured content %v", res.StructuredContent)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"name":"Ada"`) {
			t.Fatalf("text %s", text)
		}
	}
	// A refusal is a result too, on the fast path as on the SDK's.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": 7}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "invalid_input") {
		t.Fatalf("invalid arguments: %v %+v", err, res)
	}
	if n := f.s.sdkCalls.Load(); n != 0 {
		t.Errorf("the SDK dispatched %d of the calls; the fast path should have answered them all", n)
	}

	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	call := `{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`
	tests := []struct {
		name, key, sid, version, body string
		wantStatus                    int
		want                          string
	}{
		{"a string id is echoed", f.keyA, sid, version, call, 200, `"id":"x-1"`},
		{"no protocol header", f.keyA, sid, "", strings.Replace(call, `"x-1"`, `42`, 1), 200, `"id":42`},
		{"an unknown tool is a tool_unavailable result", f.keyA, sid, version, strings.Replace(call, "crm_lookup", "crm_nothing", 1), 200, `tool_unavailable`},
		{"params that are not an object", f.keyA, sid, version, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, 200, `"code":-32602`},
		{"another key's session: the SDK refuses", f.keyB, sid, version, call, http.StatusForbidden, "session user mismatch"},
		{"another protocol version: the SDK refuses", f.keyA, sid, "1999-01-01", call, http.StatusBadRequest, "Unsupported protocol version"},
		{"an unknown session: the SDK refuses", f.keyA, "NOSUCHSESSION", version, call, http.StatusNotFound, "session not found"},
		{"another method goes to the SDK", f.keyA, sid, version, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, 200, `"result":{}`},
		// Member names are matched exactly, as the SDK matches them: what
		// the SDK would not read as a call is not run as one.
		{"METHOD is not method", f.keyA, sid, version, strings.Replace(call, `"method"`, `"METHOD"`, 1), http.StatusAccepted, ""},
		{"NAME is not name", f.keyA, sid, version, strings.Replace(call, `"name"`, `"NAME"`, 1), 200, `tool_unavailable`},
		{"JSONRPC is not jsonrpc", f.keyA, sid, version, strings.Replace(call, `"jsonrpc"`, `"JSONRPC"`, 1), http.StatusBadRequest, ""},
		// (The SDK reads 1.5 as the id 1.)
		{"a fractional id is the SDK's to judge", f.keyA, sid, version, strings.Replace(call, `"x-1"`, `1.5`, 1), 200, `"id":1,`},
		{"the stateless protocol's _meta is the SDK's", f.keyA, sid, version,
			strings.Replace(call, `"arguments"`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments"`, 1), http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		status, body := f.post(t, tt.key, tt.sid, tt.version, tt.body)
		if status != tt.wantStatus || !strings.Contains(body, tt.want) || (tt.want == "" && strings.Contains(body, "Ada")) {
			t.Errorf("%s: %d %s; want %d with %s", tt.name, status, body, tt.wantStatus, tt.want)
		}
	}
	// The NAME case and the fractional id went to the SDK, the others
	// never reached a tool.
	if n := f.s.sdkCalls.Load(); n > 2 {
		t.Errorf("the SDK dispatched %d calls", n)
	}

	// Another endpoint's session is that endpoint's SDK's to refuse.
	other := httptest.NewServer(f.s.UpstreamHandler("other"))
	t.Cleanup(other.Close)
	req, _ := http.NewRequest(http.MethodPost, other.URL, strings.NewReader(call))
	for k, v := range map[string]string{"Authorization": "Bearer " + f.keyA, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": version} {
		req.Header.Set(k, v)
	}
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a session of /mcp on another endpoint: %v %v", resp, err)
	}

	// A session the client ended is not answered on the fast path.
	req, _ = http.NewRequest(http.MethodDelete, f.url, nil)
	req.Header.Set("Authorization", "Bearer "+f.keyA)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	if status, body := f.post(t, f.keyA, sid, version, call); status != http.StatusNotFound {
		t.Errorf("a call on an ended session: %d %s", status, body)
	}
}

// The header must repeat the version the session negotiated, not the one
// its client asked for.
func TestFastPathHoldsTheNegotiatedVersion(t *testing.T) {
	t.Parallel()
	f := newFastFixture(t, 0)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(init))
	for k, v := range map[string]string{"Authorization": "Bearer " + f.keyA, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	var ir struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &ir); err != nil || sid == "" || ir.Result.ProtocolVersion == "1999-01-01" {
		t.Fatalf("initialize: %s %s", sid, answer)
	}
	if status, body := f.post(t, f.keyA, sid, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status/100 != 2 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`
	if status, body := f.post(t, f.keyA, sid, "1999-01-01", call); status != http.StatusBadRequest {
		t.Errorf("the version asked for, not negotiated: %d %s", status, body)
	}
	if status, body := f.post(t, f.keyA, sid, ir.Result.ProtocolVersion, call); status != 200 || !strings.Contains(body, "Ada") {
		t.Errorf("the negotiated version: %d %s", status, body)
	}
	if n := f.s.sdkCalls.Load(); n != 0 {
		t.Errorf("the SDK dispatched %d calls", n)
	}
}

func TestSessionsIdleOutButNotWhileUsed(t *testing.T) {
	t.Parallel()
	// Long enough that a gap between two calls on a loaded machine (the
	// suite runs under -race beside other packages) never reaches it.
	const idle = time.Second
	f := newFastFixture(t, idle)
	cs := f.connect(t)
	call := func() error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": "c-1"}})
		return err
	}
	// Fast-path calls alone, for twice the idle time, keep it.
	for end := time.Now().Add(2 * idle); time.Now().Before(end); time.Sleep(idle / 10) {
		if err := call(); err != nil {
			t.Fatalf("a session in use was closed: %v", err)
		}
	}
	if n := f.s.sdkCalls.Load(); n != 0 {
		t.Errorf("the SDK dispatched %d calls", n)
	}
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	time.Sleep(2 * idle)
	status, body := f.post(t, f.keyA, sid, version, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`)
	if status != http.StatusNotFound {
		t.Errorf("a call after the session idled out: %d %s", status, body)
	}
}

// FuzzFastPath posts arbitrary bodies on an established session: whatever
// the fast path takes or leaves to the SDK, nothing fails inside the
// server, and a tools/call answered as JSON echoes its request's id.
func FuzzFastPath(f *testing.F) {
	fx := newFastFixture(f, 0)
	cs := fx.connect(f)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":7}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crm_lookup","arguments":"x","_meta":{"toolplane/max_cost_cents":-1}}}`,
		` {"jsonrpc":"2.0","id":-3e2,"method":"tools/call","params":{"name":"nothing"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"1.0","id":5,"method":"tools/call"}`,
		`{`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		status, answer := fx.post(t, fx.keyA, sid, version, body)
		if status >= 500 {
			t.Fatalf("%q: %d %s", body, status, answer)
		}
		c, isCall := parseCall([]byte(body))
		if !isCall {
			return
		}
		if status != http.StatusOK {
			t.Fatalf("%q: a call the fast path takes answered %d %s", body, status, answer)
		}
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(answer), &resp); err != nil || (resp.Result == nil) == (resp.Error == nil) {
			t.Fatalf("%q: the answer is not one JSON-RPC response: %s", body, answer)
		}
		var a, b any
		if json.Unmarshal(resp.ID, &a) != nil || json.Unmarshal(c.id, &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%q: answered id %s", body, resp.ID)
		}
	})
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`1`: true, `-42`: true, `0`: true, `"x-1"`: true, `""`: true, `123456789012345678`: true,
		``: false, `null`: false, `1.5`: false, `-3e2`: false, `01`: false, `-`: false, `"unterminated`: false,
		`1234567890123456789`: false, `{}`: false, `true`: false,
	} {
		if got := validID(json.RawMessage(raw)); got != want {
			t.Errorf("validID(%s) = %v, want %v", raw, got, want)
		}
	}
}

// One session opened is one session built, though the SDK asks for a
// server twice while opening it.
func TestOpeningASessionBuildsOne(t *testing.T) {
	t.Parallel()
	f := newFastFixture(t, 0)
	f.connect(t)
	f.s.mu.Lock()
	n := len(f.s.sessions)
	f.s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d sessions built for one opened", n)
	}
}

// A body over the limit is refused as the SDK refuses it, with or without
// a session: the fast path's reading of it changes nothing.
func TestOversizedBodiesAreRefused(t *testing.T) {
	t.Parallel()
	f := newFastFixture(t, 0)
	cs := f.connect(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"` + strings.Repeat("x", maxRequestBody) + `"}}}`
	for _, sid := range []string{"", cs.ID()} {
		req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(big))
		for k, v := range map[string]string{"Authorization": "Bearer " + f.keyA, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
			req.Header.Set(k, v)
		}
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("session %q: %d, want 413", sid, resp.StatusCode)
		}
	}
}
