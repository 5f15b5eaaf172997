package metrics

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/sqlite"
)

// deployment is a node's metrics over a real SQLite store and invoker,
// every family of them fed by what a node does.
type deployment struct {
	m     *Metrics
	store *sqlite.Store
	iv    *invoke.Invoker
	appr  *approval.Service
}

type bindings struct{ *handler.Registry }

func (bindings) Connection(string) bool   { return true }
func (bindings) FactResolver(string) bool { return true }

func newDeployment(t testing.TB) *deployment {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := sqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d := &deployment{store: store}
	d.m = NewWith(Config{Pending: Pending(store), Uncertain: Uncertain(store)})
	d.appr = approval.New(approval.Config{Store: store, Decided: d.m.ApprovalDecided})

	in := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	out := json.RawMessage(`{"type":"object"}`)
	defs := []toolplane.Definition{
		{Name: "research.search", Version: "1.2.0", Description: "Search the web.", InputSchema: in, OutputSchema: out,
			Kind: toolplane.KindVendor, Connection: "search", Metered: true, Effect: toolplane.EffectRead,
			Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "research.search"}}, Timeout: toolplane.Duration(2 * time.Second)},
		{Name: "payments.refund", Version: "2.0.0", Description: "Refund an order.", InputSchema: in, OutputSchema: out,
			Kind: toolplane.KindInternal, Effect: toolplane.EffectRead,
			Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "payments.refund"}}, Timeout: toolplane.Duration(2 * time.Second)},
	}
	hs := handler.NewRegistry()
	for _, b := range []struct {
		key string
		fn  handler.Func
	}{
		{"research.search", func(ctx context.Context, _ handler.Call, _ any) (any, error) {
			if err := handler.ReportUsage(ctx, 12, 1); err != nil {
				return nil, err
			}
			return map[string]any{"hits": 3}, nil
		}},
		{"payments.refund", func(context.Context, handler.Call, any) (any, error) { return map[string]any{}, nil }},
	} {
		bound, err := handler.BindFunc(b.key, b.fn, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(bound); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	d.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{Deny: []string{"payments.*"}},
		Approvals: d.appr, Observer: d.m, Node: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *deployment) call(t testing.TB, tool, agent string) toolplane.Result {
	t.Helper()
	r, err := d.iv.Invoke(context.Background(), tool, map[string]any{"q": "x"}, &toolplane.Invocation{
		OrganizationID: "acme", RunID: "run-1", AgentID: agent, StepPath: "agent",
		Principal: toolplane.Principal{ID: agent, Tools: []string{"research.search", "payments.refund"}}, Source: toolplane.SourceSDK,
		Ceilings: toolplane.Ceilings{MaxCostCents: 1000},
	})
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	return r
}

// A node's calls through the one invoker reach every call family: by
// tool, version, agent and outcome, the stages each call reached, what a
// metered call cost, and whom the policy denied. A name no tool has is
// labelled unknown, never by what the caller sent.
func TestInvokerReportsCalls(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	if r := d.call(t, "research.search", "agent-1"); !r.OK {
		t.Fatalf("search: %+v", r.Error)
	}
	if r := d.call(t, "payments.refund", "agent-2"); r.OK || r.Error.Code != toolplane.CodeDenied {
		t.Fatalf("refund: %+v", r)
	}
	if r := d.call(t, "made.up_name_4711", "agent-2"); r.OK || r.Error.Code != toolplane.CodeToolUnavailable {
		t.Fatalf("made-up name: %+v", r)
	}
	out := scrape(t, d.m)
	for _, want := range []string{
		`toolplane_tool_calls_total{agent="agent-1",outcome="ok",tool="research.search",version="1.2.0"} 1`,
		`toolplane_tool_calls_total{agent="agent-2",outcome="denied",tool="payments.refund",version="2.0.0"} 1`,
		`toolplane_tool_calls_total{agent="agent-2",outcome="tool_unavailable",tool="unknown",version=""} 1`,
		`toolplane_tool_call_seconds_count{tool="research.search"} 1`,
		`toolplane_spend_cents_total{agent="agent-1",organization="acme",tool="research.search"} 12`,
		`toolplane_authz_denials_total{agent="agent-2",organization="acme"} 1`,
		// All three were validated and audited; two reached the policy;
		// only the allowed one ran a handler and crossed the boundary.
		`toolplane_call_stage_seconds_count{stage="validate"} 3`,
		`toolplane_call_stage_seconds_count{stage="policy"} 2`,
		`toolplane_call_stage_seconds_count{stage="handler"} 1`,
		`toolplane_call_stage_seconds_count{stage="boundary"} 1`,
		`toolplane_call_stage_seconds_count{stage="audit"} 3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(out, "made.up_name_4711") {
		t.Error("a name the caller made up became a label")
	}
}

// exercise makes a deployment whose every family has a series: calls of
// each kind, an approval decided and one pending, an uncertain action
// open, a breaker and a bulkhead in use, a webhook dropped and a rate
// limit that fell back.
func exercise(t testing.TB) *Metrics {
	t.Helper()
	d := newDeployment(t)
	ctx := context.Background()
	d.call(t, "research.search", "agent-1")
	d.call(t, "payments.refund", "agent-1")
	for i, decide := range []bool{true, false} {
		a := &toolplane.Approval{OrganizationID: "acme", RunID: "run-1", Tool: "payments.refund", Key: "k" + string(rune('a'+i)),
			ArgumentsHash: "h", Arguments: []byte(`{}`), Invocation: []byte(`{}`), PrincipalID: "agent-1"}
		if _, err := d.appr.File(ctx, a); err != nil {
			t.Fatal(err)
		}
		if decide {
			by := &toolplane.Credential{OrganizationID: "acme", Subject: "ada", Kind: toolplane.CredentialPerson, Roles: []string{toolplane.RoleApprover}}
			if _, err := d.appr.Resolve(ctx, a.ID, approval.Decision{Reason: "no"}, by, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ok, err := d.store.InsertClaim(ctx, &toolplane.Claim{OrganizationID: "acme", Tool: "payments.refund", Key: "held",
		RequestHash: "h", Status: toolplane.ClaimUncertain, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	tr := resilience.New(resilience.Config{ToolMaxInFlight: 4, AgentMaxInFlight: 1})
	d.m.WatchTraffic(tr)
	tr.Breaker("acme", "research.search", "search")
	req := resilience.Request{Organization: "acme", Agent: "agent-1", Tool: "research.search", Target: "search"}
	tk, ref := tr.Admit(req)
	if ref != nil {
		t.Fatal(ref)
	}
	t.Cleanup(func() { tk.EndWork(); tk.EndCall() })
	if _, ref := tr.Admit(req); ref == nil {
		t.Fatal("the agent's cap of one let a second call in")
	}
	d.m.WebhookDropped("acme-vendor", "bad_signature")
	d.m.RateLimitFallback("redis")()
	// The export and span families only need to be registered here:
	// their values are tested where the outbox and the span queue live.
	d.m.WatchExports([]ExportLag{sinkLag{}}, nil)
	d.m.WatchSpans(spanDrops{})
	return d.m
}

// sinkLag is a sink with one event waiting.
type sinkLag struct{}

func (sinkLag) Sink() string { return "jetstream" }
func (sinkLag) Lag(context.Context, *string) (toolplane.AuditOutboxLag, error) {
	return toolplane.AuditOutboxLag{Pending: 1, Oldest: time.Now().Add(-time.Second)}, nil
}

// spanDrops is a span queue that dropped a span.
type spanDrops struct{}

func (spanDrops) Dropped() (queueFull, exportFailed uint64) { return 1, 0 }

// Over a real store: the approval a person decided is timed under its
// decision, the one still waiting and the uncertain action are counted
// from the store, and the bulkhead in use shows against its cap.
func TestStoreGaugesAndApprovalWait(t *testing.T) {
	t.Parallel()
	out := scrape(t, exercise(t))
	for _, want := range []string{
		`toolplane_approval_wait_seconds_count{decision="rejected"} 1`,
		`toolplane_approvals_pending{organization="acme"} 1`,
		`toolplane_uncertain_actions_open{organization="acme"} 1`,
		`toolplane_bulkhead_saturation{name="acme/research.search",scope="tool"} 0.25`,
		`toolplane_breaker_state{organization="acme",target="search",tool="research.search"} 0`,
		`toolplane_traffic_refused_total{reason="agent_in_flight"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
