package httpruntime_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// token is the secret the test connection presents; no answer, error or
// stored result may ever hold it.
const token = "tok-7f3a9c1e55d04b2a"

// connection answers the connection a test broker releases.
func connection() *toolplane.Released {
	return &toolplane.Released{
		Connection: &toolplane.Connection{ID: "con_billing1", OrganizationID: "org-1", Provider: "billing",
			Kind: toolplane.ConnectionStatic, State: toolplane.ConnectionActive},
		Secrets: toolplane.Secrets{Token: token},
	}
}

// broker releases one fixed connection and counts releases.
type broker struct {
	rel *toolplane.Released
	n   atomic.Int64
}

func (b *broker) Release(context.Context, invoke.Release) (*toolplane.Released, error) {
	b.n.Add(1)
	return b.rel, nil
}

// runtimes adapts a Runtime to the invoker, binding each definition once
// as a deployment's wiring does.
type runtimes struct {
	rt    *httpruntime.Runtime
	mu    sync.Mutex
	bound map[string]*handler.Binding
}

func (r *runtimes) Binding(d *toolplane.Definition) (*handler.Binding, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := httpruntime.Key(d)
	if b, ok := r.bound[key]; ok {
		return b, nil
	}
	b, err := r.rt.Bind(d)
	if err != nil {
		return nil, err
	}
	r.bound[key] = b
	return b, nil
}

// plainClient answers what a test gives for the connection's client: one
// client for every call, over a transport of its own. The deployment's
// client adds egress rules, which are not this package's.
func plainClient(t testing.TB) func(*toolplane.Released) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	return func(*toolplane.Released) (*http.Client, error) { return c, nil }
}

func hashOf(t testing.TB, a any) string {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	h, err := canonical.HashJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const inputSchema = `{"type":"object","properties":{
	"id":{"type":"string"},"q":{"type":"string"},"n":{"type":"number"},"trace":{"type":"string"},
	"tags":{"type":"array","items":{"type":"string"}},"amount":{"type":"number"},"note":{"type":"string"}}}`

// httpDef answers a definition bound to an HTTP request.
func httpDef(name string, effect toolplane.Effect, b toolplane.HTTPBinding, mutate ...func(*toolplane.Definition)) toolplane.Definition {
	d := toolplane.Definition{
		Name: name, Version: "1.0.0", Description: "A tool answered by an HTTP request.",
		InputSchema: json.RawMessage(inputSchema), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{HTTP: &b},
		Effect: effect, Connection: "billing", Timeout: toolplane.Duration(2 * time.Second),
	}
	if effect.Writes() {
		no := false
		d.Repeatable = &no
	}
	for _, m := range mutate {
		m(&d)
	}
	return d
}

// env is an invoker over a real SQLite store whose tools are answered by
// the http runtime.
type env struct {
	iv     *invoke.Invoker
	broker *broker
	store  interface {
		GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error)
	}
}

func newEnv(t testing.TB, defs ...toolplane.Definition) *env {
	t.Helper()
	// The registry is built from stand-ins bound to a handler key, and
	// each built tool then takes its http binding: the invoker reads the
	// binding from the built tool, and this keeps the test about the
	// runtime rather than the registry's admission of runtime bindings.
	// The stand-ins are open-world, so the registry labels their answers
	// untrusted as it does a runtime's.
	stand := make([]toolplane.Definition, len(defs))
	keys := map[string]bool{}
	for i, d := range defs {
		s := d
		s.Binding = toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "standin." + d.Name}}
		s.Annotations.OpenWorld = true
		s.Price = nil // a handler's price is its own to report
		keys[s.Binding.Handler.Key] = false
		stand[i] = s
	}
	reg, _, err := registry.Build(stand, registry.Options{Bindings: registry.Static{Handlers: keys}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		tool, ok := reg.Get("org-1", d.Name)
		if !ok {
			t.Fatalf("tool %s not built", d.Name)
		}
		tool.Def.Binding, tool.Def.Price = d.Binding, d.Price
	}
	store := sqlitetest.New(t)
	e := &env{broker: &broker{rel: connection()}, store: store}
	e.iv, err = invoke.New(invoke.Config{
		Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{},
		Runtimes: &runtimes{rt: httpruntime.New(httpruntime.Config{Client: plainClient(t)}), bound: map[string]*handler.Binding{}},
		Broker:   e.broker, Node: "test", LeaseMargin: time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func inv(tools ...string) *toolplane.Invocation {
	return &toolplane.Invocation{
		OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: tools}, Source: toolplane.SourceSDK,
	}
}

// call invokes tool with args, as agent-1 in run-1.
func (e *env) call(t testing.TB, tool string, args map[string]any) toolplane.Result {
	t.Helper()
	r, err := e.iv.Invoke(context.Background(), tool, args, inv(tool))
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	return r
}

// claim answers the journal's claim of a write call, nil when none is
// stored (released, or never taken).
func (e *env) claim(t testing.TB, tool string, args map[string]any) *toolplane.Claim {
	t.Helper()
	h := hashOf(t, args)
	c, err := e.store.GetClaim(context.Background(), "org-1", tool, invoke.Key(inv(tool), h))
	if err != nil {
		return nil
	}
	return c
}
