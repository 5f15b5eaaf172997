package upstream_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/fencetest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/upstream"
)

// env is toolplane serving one set of upstreams through the invoker.
type env struct {
	ctx       context.Context
	db        *sql.DB // the store's database, for a test that must reach under the store
	store     *sqlite.Store
	reg       *registry.Registry
	set       *upstream.Set
	iv        *invoke.Invoker
	approvals *approval.Service
	mcp       *mcpserver.Server
	key       string
}

type bindings struct {
	*handler.Registry
	set *upstream.Set
}

func (b bindings) Connection(id string) bool { return b.set.Connection(id) }
func (bindings) FactResolver(string) bool    { return false }

func newEnv(t testing.TB, platform []toolplane.Definition, cfgs ...upstream.Config) *env {
	t.Helper()
	ctx := context.Background()
	store, db := sqlitetest.NewDB(t)
	quiet := slog.New(slog.DiscardHandler)
	set, err := upstream.New(cfgs, upstream.Options{Logger: quiet, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	peek, err := handler.BindFunc("platform.peek", func(context.Context, handler.Call, any) (any, error) { return map[string]any{}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(peek); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build(platform, registry.Options{Bindings: bindings{hs, set}})
	if err != nil {
		t.Fatal(err)
	}
	set.UseRegistry(reg)
	set.Start(ctx, 20*time.Second)
	t.Cleanup(set.Close)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Remotes: set, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Tools: []string{"mcp.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return &env{ctx: ctx, db: db, store: store, reg: reg, set: set, iv: iv, approvals: approvals, key: apikey.Key(id, secret),
		mcp: &mcpserver.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Version: "test", Upstreams: set}}
}

func (e *env) inv(run string) *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: "org-1", RunID: run, AgentID: "agent-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"mcp.up.lookup", "mcp.up.send", "mcp.up.fail", "mcp.up.peek", "mcp.everything.echo", "mcp.everything.get-sum"}},
		Source:    toolplane.SourceSDK}
}

func (e *env) call(t *testing.T, tool, args, run string) (toolplane.Result, error) {
	t.Helper()
	return e.iv.InvokeJSON(e.ctx, tool, json.RawMessage(args), e.inv(run))
}

// approveAndRun files, approves and executes a call that needs approval,
// answering the executed result.
func (e *env) approveAndRun(t *testing.T, tool, args, run string) toolplane.Result {
	t.Helper()
	_, err := e.call(t, tool, args, run)
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("%s: want approval required, got %v", tool, err)
	}
	if _, err := e.approvals.Resolve(e.ctx, ar.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RoleApprover}}, e.iv.CheckApproval); err != nil {
		t.Fatal(err)
	}
	in := e.inv(run)
	in.AuthorizedBy = ar.ID
	r, err := e.iv.InvokeJSON(e.ctx, tool, json.RawMessage(args), in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lookupIn struct {
	ID string `json:"id"`
}
type lookupOut struct {
	ID    string `json:"id"`
	Found bool   `json:"found"`
}

// goUpstream is an MCP server written with the SDK, served over Streamable
// HTTP on loopback: a server whose tools the test can change.
func goUpstream(t testing.TB, sent *atomic.Int32) (*mcp.Server, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look a record up by id."},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, lookupOut, error) {
			return nil, lookupOut{ID: in.ID, Found: true}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "send", Description: "Send a message."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			To string `json:"to"`
		}) (*mcp.CallToolResult, any, error) {
			sent.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent to " + in.To}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "quota exceeded for this account"}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "peek", Description: "Peek."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "peeked"}}}, nil, nil
		})
	srv.AddResource(&mcp.Resource{URI: "note://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "read me"}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greet someone."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["name"]}}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func no() *bool { b := false; return &b }

// platformPeek is a platform tool whose model-facing name (mcp_up_peek) is
// the one the upstream's peek would take.
func platformPeek() toolplane.Definition {
	return toolplane.Definition{
		Name: "mcp_up.peek", Kind: toolplane.KindInternal, Version: "1.0.0", Description: "A platform tool that was here first.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect: toolplane.EffectRead, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "platform.peek"}},
	}
}

func TestIngestedToolsTakeRestrictiveDefaults(t *testing.T) {
	var sent atomic.Int32
	_, upURL := goUpstream(t, &sent)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL, Owner: "team-a",
		Tools: map[string]upstream.Relax{"lookup": {Effect: toolplane.EffectRead, RequiresApproval: no()}}})

	tests := []struct {
		name                string
		effect              toolplane.Effect
		destructive, review bool
	}{
		{"mcp.up.send", toolplane.EffectWrite, true, true},
		{"mcp.up.fail", toolplane.EffectWrite, true, true},
		{"mcp.up.lookup", toolplane.EffectRead, false, false}, // relaxed by its owner
	}
	for _, tt := range tests {
		tool, ok := e.reg.Get("", tt.name)
		if !ok {
			t.Fatalf("%s not ingested", tt.name)
		}
		d := tool.Def
		if d.Kind != toolplane.KindMCP || d.Effect != tt.effect || d.Annotations.Destructive != tt.destructive ||
			d.Annotations.RequiresApproval != tt.review || d.Version != "1.0.0" || d.Owner != "team-a" {
			t.Errorf("%s: kind %s effect %s destructive %v requires_approval %v version %s owner %q", tt.name,
				d.Kind, d.Effect, d.Annotations.Destructive, d.Annotations.RequiresApproval, d.Version, d.Owner)
		}
	}

	r, err := e.call(t, "mcp.up.lookup", `{"id":"r-7"}`, "run-1")
	if err != nil || !r.OK {
		t.Fatalf("lookup: %+v %v", r, err)
	}
	if got, _ := json.Marshal(r.Data); string(got) != `{"found":true,"id":"r-7"}` {
		t.Errorf("lookup answered %s", got)
	}
	if !r.Meta.Untrusted {
		t.Error("a remote tool's answer is not labelled untrusted")
	}
	// Arguments are validated against the remote's own schema before
	// anything is sent.
	if r, _ := e.call(t, "mcp.up.lookup", `{"id":7}`, "run-1"); r.OK || r.Error.Code != toolplane.CodeInvalidInput || r.Error.FieldPath != "/id" {
		t.Errorf("bad argument: %+v", r)
	}

	// A write waits for a person; approved, it reaches the server once.
	r = e.approveAndRun(t, "mcp.up.send", `{"to":"ops"}`, "run-1")
	if !r.OK || sent.Load() != 1 {
		t.Fatalf("send: %+v, sent %d", r, sent.Load())
	}
	// The identical call again is answered from the journal: no second
	// approval, no second effect.
	again, err := e.call(t, "mcp.up.send", `{"to":"ops"}`, "run-1")
	if err != nil || !again.Meta.Replayed || sent.Load() != 1 {
		t.Errorf("second identical send: replayed %v, sent %d", again.Meta.Replayed, sent.Load())
	}
	// A tool that answers isError is a definite failure the model reads.
	r = e.approveAndRun(t, "mcp.up.fail", `{}`, "run-1")
	if r.OK || r.Error.Code != toolplane.CodeInvalidInput || !strings.Contains(r.Error.Message, "quota exceeded") {
		t.Errorf("fail: %+v", r.Error)
	}
	// Its text is the server's: labelled untrusted, as its answers are,
	// and still so when the journal answers it again.
	if !r.Meta.Untrusted {
		t.Errorf("the server's error text is not labelled untrusted: %+v", r)
	}
	if again, err := e.call(t, "mcp.up.fail", `{}`, "run-1"); err != nil || !again.Meta.Replayed || !again.Meta.Untrusted {
		t.Errorf("the replayed error: %+v %v", again, err)
	}
}

func TestPlatformNameCollisionIsRefusedNotShadowed(t *testing.T) {
	var sent atomic.Int32
	_, upURL := goUpstream(t, &sent)
	e := newEnv(t, []toolplane.Definition{platformPeek()}, upstream.Config{Slug: "up", URL: upURL})
	if _, ok := e.reg.Get("", "mcp.up.peek"); ok {
		t.Error("mcp.up.peek was ingested though its model-facing name is taken")
	}
	tool, ok := e.reg.ByModelName("", "mcp_up_peek")
	if !ok || tool.Def.Name != "mcp_up.peek" {
		t.Errorf("the platform tool lost its name: %+v", tool)
	}
	if _, ok := e.reg.Get("", "mcp.up.lookup"); !ok {
		t.Error("one refused tool kept the rest of the server out")
	}
}

func TestRemovedUpstreamToolAnswersToolUnavailable(t *testing.T) {
	var sent atomic.Int32
	up, upURL := goUpstream(t, &sent)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL,
		Tools: map[string]upstream.Relax{"lookup": {Effect: toolplane.EffectRead, RequiresApproval: no()}}})
	if r, err := e.call(t, "mcp.up.lookup", `{"id":"a"}`, "run-1"); err != nil || !r.OK {
		t.Fatalf("before removal: %+v %v", r, err)
	}
	// The presence check reads what the server last published.
	if _, err := e.set.Binding(&toolplane.RemoteBinding{ConnectionID: "up", RemoteName: "nope"}); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("binding of a tool the server never published: %v", err)
	}
	up.RemoveTools("lookup")
	eventually(t, "the removal to reach the registry", func() bool { _, ok := e.reg.Get("", "mcp.up.lookup"); return !ok })
	r, err := e.call(t, "mcp.up.lookup", `{"id":"a"}`, "run-1")
	if err != nil || r.OK || r.Error.Code != toolplane.CodeToolUnavailable {
		t.Fatalf("after removal: %+v %v", r, err)
	}
	if _, err := e.set.Binding(&toolplane.RemoteBinding{ConnectionID: "up", RemoteName: "lookup"}); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("binding of a removed tool: %v", err)
	}
}

// clientFor connects an SDK client to an MCP endpoint of the env, noting
// each tools/list_changed it is sent.
func (e *env) clientFor(t testing.TB, h http.Handler, changed chan<- struct{}) *mcp.ClientSession {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	cs, err := client.Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL,
		HTTPClient: &http.Client{Transport: bearer{e.key, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func TestChangedContractAnswersToolChangedUntilListedAgain(t *testing.T) {
	var sent atomic.Int32
	up, upURL := goUpstream(t, &sent)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL,
		Tools: map[string]upstream.Relax{"lookup": {Effect: toolplane.EffectRead, RequiresApproval: no()}}})
	changed := make(chan struct{}, 1)
	cs := e.clientFor(t, e.mcp.Handler(), changed)
	if names := toolNames(t, e.ctx, cs); !contains(names, "mcp_up_lookup") {
		t.Fatalf("tools/list: %v", names)
	}
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "mcp_up_lookup", Arguments: map[string]any{"id": "a"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(); res.IsError {
		t.Fatalf("before the change: %v", text(res))
	}

	// The server changes the tool's contract: a new required argument.
	mcp.AddTool(up, &mcp.Tool{Name: "lookup", Description: "Look a record up by id and region."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			ID     string `json:"id"`
			Region string `json:"region"`
		}) (*mcp.CallToolResult, lookupOut, error) {
			return nil, lookupOut{ID: in.ID, Found: true}, nil
		})
	eventually(t, "version 2.0.0", func() bool { tool, ok := e.reg.Get("", "mcp.up.lookup"); return ok && tool.Def.Version == "2.0.0" })
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told its tool list changed")
	}
	// The session was shown the old contract: the call is not sent.
	if res := call(); !res.IsError || !strings.Contains(text(res), string(toolplane.CodeToolChanged)) {
		t.Fatalf("after the change: %v", text(res))
	}
	// Listed again, the session holds the new contract.
	toolNames(t, e.ctx, cs)
	res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "mcp_up_lookup", Arguments: map[string]any{"id": "a", "region": "eu"}})
	if err != nil || res.IsError {
		t.Fatalf("after listing again: %v %v", text(res), err)
	}
}

func TestGovernedCopyServesTheUpstreamsOwnNames(t *testing.T) {
	var sent atomic.Int32
	_, upURL := goUpstream(t, &sent)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL,
		Tools: map[string]upstream.Relax{"lookup": {Effect: toolplane.EffectRead, RequiresApproval: no()}, "peek": {Effect: toolplane.EffectRead, RequiresApproval: no()}}})
	cs := e.clientFor(t, e.mcp.UpstreamHandler("up"), nil)
	names := toolNames(t, e.ctx, cs)
	for _, want := range []string{"fail", "lookup", "peek", "send"} {
		if !contains(names, want) {
			t.Errorf("governed copy lists %v, missing %s", names, want)
		}
	}
	res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "peek", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("peek: %v %v", res, err)
	}
	// The server's own content, its text fenced as untrusted.
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok {
		t.Errorf("the copy did not answer the server's own content: %#v", res.Content)
	} else if _, text, fenced := fencetest.Unfence(tc.Text); !fenced || text != "peeked" {
		t.Errorf("the copy did not answer the server's own content, fenced: %q", tc.Text)
	}
	res, err = cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"id": "z"}})
	if err != nil || res.IsError {
		t.Fatalf("lookup: %v %v", res, err)
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"found":true,"id":"z"}` {
		t.Errorf("structured content %s", got)
	}
	// Resources and prompts are relayed as the server gives them, labelled
	// untrusted in their _meta.
	rr, err := cs.ReadResource(e.ctx, &mcp.ReadResourceParams{URI: "note://readme"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "read me" {
		t.Errorf("resource through the copy: %+v %v", rr, err)
	} else if rr.Meta["toolplane/untrusted"] != true {
		t.Errorf("a relayed resource is not labelled untrusted: %v", rr.Meta)
	}
	gp, err := cs.GetPrompt(e.ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "ada"}})
	if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello ada" {
		t.Errorf("prompt through the copy: %+v %v", gp, err)
	} else if gp.Meta["toolplane/untrusted"] != true || gp.Messages[0].Content.(*mcp.TextContent).Meta["toolplane/untrusted"] != true {
		t.Errorf("a relayed prompt is not labelled untrusted: %v, message %v", gp.Meta, gp.Messages[0].Content.(*mcp.TextContent).Meta)
	}
	// A tool the copy does not show is a tool_unavailable result.
	res, err = cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(res), string(toolplane.CodeToolUnavailable)) {
		t.Errorf("unknown tool: %v %v", res, err)
	}
	// Still governed: the write waits for approval.
	res, err = cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "send", Arguments: map[string]any{"to": "x"}})
	if err != nil || res.Meta["toolplane/approval_id"] == nil || sent.Load() != 0 {
		t.Errorf("send through the copy: %v %v, sent %d", res, err, sent.Load())
	}
}

func TestUnreachableServerAnswersUnavailable(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	hs.Close() // nothing listens there now
	pinned := toolplane.Definition{
		Name: "mcp.gone.lookup", Kind: toolplane.KindMCP, Version: "1.0.0", Description: "Pinned by the platform.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect: toolplane.EffectRead, Binding: toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "gone", RemoteName: "lookup"}},
	}
	e := newEnv(t, []toolplane.Definition{pinned}, upstream.Config{Slug: "gone", URL: hs.URL})
	in := e.inv("run-1")
	in.Principal.Tools = []string{"mcp.gone.lookup"}
	r, err := e.iv.InvokeJSON(e.ctx, "mcp.gone.lookup", json.RawMessage(`{}`), in)
	if err != nil || r.OK || r.Error.Code != toolplane.CodeUnavailable {
		t.Fatalf("unreachable server: %+v %v", r, err)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}
