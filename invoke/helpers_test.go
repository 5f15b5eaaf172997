package invoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// newClock answers the tests' settable clock at their start time.
func newClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

// openStore and newStore are the shared ways to open a real test store
// (a migrated file at a path, a fresh one), under the names this
// package's tests call them by.
var (
	openStore = sqlitetest.Open
	newStore  = sqlitetest.New
)

// counting wraps a policy and counts decisions.
type counting struct {
	inner policy.Policy
	n     atomic.Int64
}

func (c *counting) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	c.n.Add(1)
	return c.inner.Decide(ctx, in)
}

// reporter counts fault reports.
type reporter struct{ n atomic.Int64 }

func (r *reporter) Report(context.Context, string, error) { r.n.Add(1) }

const objectIn = `{"type":"object","additionalProperties":false,"properties":{"to":{"type":"string"},"body":{"type":"string"},"password":{"type":"string"},"items":{"type":"array","items":{"type":"string"}}}}`

func def(name string, effect toolplane.Effect, mutate ...func(*toolplane.Definition)) toolplane.Definition {
	d := toolplane.Definition{
		Name: name, Version: "1.0.0", Description: "A test tool.",
		InputSchema: json.RawMessage(objectIn), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}},
		Effect: effect, Timeout: toolplane.Duration(2 * time.Second),
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

// env is an invoker over a real SQLite store with counting handlers.
type env struct {
	t         testing.TB
	store     *sqlite.Store
	clock     *testclock.Clock
	iv        *invoke.Invoker
	approvals *approval.Service
	policy    *counting
	reporter  *reporter
	calls     map[string]*atomic.Int64
}

type tool struct {
	def      toolplane.Definition
	fn       handler.Func
	classify func(error) handler.Ending
	opts     []handler.Option
}

func newEnv(t testing.TB, store *sqlite.Store, tools ...tool) *env {
	t.Helper()
	return newEnvWith(t, store, nil, tools...)
}

// newEnvWith is newEnv with a last word on the invoker's configuration.
func newEnvWith(t testing.TB, store *sqlite.Store, tune func(*invoke.Config), tools ...tool) *env {
	t.Helper()
	e := &env{t: t, store: store, clock: newClock(), reporter: &reporter{}, calls: map[string]*atomic.Int64{}}
	hs := handler.NewRegistry()
	var defs []toolplane.Definition
	for _, tl := range tools {
		n := &atomic.Int64{}
		e.calls[tl.def.Name] = n
		fn := tl.fn
		b, err := handler.BindFunc(tl.def.Binding.Handler.Key, func(ctx context.Context, c handler.Call, args any) (any, error) {
			n.Add(1)
			return fn(ctx, c, args)
		}, tl.classify, tl.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
		defs = append(defs, tl.def)
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	e.approvals = approval.New(approval.Config{Store: store, Now: e.clock.Now, TTL: time.Hour})
	e.policy = &counting{inner: policy.Grants{}}
	cfg := invoke.Config{
		Registry: reg, Handlers: hs, Store: store, Policy: e.policy, Approvals: e.approvals,
		Reporter: e.reporter, Now: e.clock.Now, Node: "test", LeaseMargin: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	}
	if tune != nil {
		tune(&cfg)
	}
	e.iv, err = invoke.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type bindings struct{ *handler.Registry }

func (bindings) Connection(string) bool   { return true }
func (bindings) FactResolver(string) bool { return true }

func (e *env) count(name string) int64 { return e.calls[name].Load() }

func inv(tools ...string) *toolplane.Invocation {
	return &toolplane.Invocation{
		OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: tools}, Source: toolplane.SourceSDK,
	}
}

func args(kv ...string) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func ok(v any) handler.Func {
	return func(context.Context, handler.Call, any) (any, error) { return v, nil }
}

func mustOK(t testing.TB, r toolplane.Result, err error) toolplane.Result {
	t.Helper()
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if !r.OK {
		t.Fatalf("result: %+v", r.Error)
	}
	return r
}

func code(t testing.TB, r toolplane.Result, err error, want toolplane.Code) {
	t.Helper()
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if r.OK || r.Error == nil || r.Error.Code != want {
		t.Fatalf("result = %+v, want %s", r, want)
	}
}

func claimOf(t testing.TB, s *sqlite.Store, tool string, in *toolplane.Invocation, a map[string]any) (*toolplane.Claim, error) {
	t.Helper()
	h := hashOf(t, a)
	return s.GetClaim(context.Background(), in.OrganizationID, tool, invoke.Key(in, h))
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

// checker lets a call's two results feed an assertion directly:
// must(t).OK(e.iv.Invoke(...)).
type checker struct{ t testing.TB }

func must(t testing.TB) checker { return checker{t} }

func (c checker) OK(r toolplane.Result, err error) toolplane.Result {
	c.t.Helper()
	return mustOK(c.t, r, err)
}

func (c checker) Approval(r toolplane.Result, err error) *invoke.ApprovalRequired {
	c.t.Helper()
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) || r.OK || r.Error != nil {
		c.t.Fatalf("result = %+v, err = %v; want ApprovalRequired", r, err)
	}
	return ar
}

// withAudit configures an invoker with a background audit writer.
func withAudit(t testing.TB, store *sqlite.Store) func(*invoke.Config) {
	return func(c *invoke.Config) {
		w := audit.NewWriter(audit.WriterConfig{Store: store, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(w.Close)
		c.Audit = w
	}
}

// approverAlice is a person of org-1 who answers approvals and reconciles
// uncertain actions.
var approverAlice = &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}
