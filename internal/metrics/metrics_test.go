package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
)

// scrape answers what /metrics serves now.
func scrape(t testing.TB, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// call answers an observation of one call of tool by agent.
func call(tool, agent, outcome string, took time.Duration) *invoke.Observation {
	return &invoke.Observation{Organization: "acme", Agent: agent, Tool: tool, Version: "1.0.0", Outcome: outcome, Took: took}
}

func TestMetricsCountCallsAndGauges(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	fail := false
	count := func(byOrg map[string]int) func(context.Context) (map[string]int, error) {
		return func(context.Context) (map[string]int, error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return nil, errors.New("database down")
			}
			return byOrg, nil
		}
	}
	m := NewWith(Config{Pending: count(map[string]int{"acme": 3, "globex": 1}), Uncertain: count(map[string]int{"acme": 2})})
	m.ObserveCall(call("demo.add_note", "agent-1", "ok", 3*time.Millisecond))
	m.ObserveCall(call("demo.add_note", "agent-1", "ok", 4*time.Millisecond))
	m.ObserveCall(call("demo.add_note", "agent-2", "invalid_input", time.Millisecond))
	denied := call("payments.refund", "agent-2", "denied", time.Millisecond)
	m.ObserveCall(denied)
	m.ObserveCall(denied)
	metered := call("search.web", "agent-1", "ok", time.Millisecond)
	metered.CostCents = 7
	m.ObserveCall(metered)
	m.ObserveCall(metered)
	out := scrape(t, m)
	for _, want := range []string{
		`toolplane_tool_calls_total{agent="agent-1",outcome="ok",tool="demo.add_note",version="1.0.0"} 2`,
		`toolplane_tool_calls_total{agent="agent-2",outcome="invalid_input",tool="demo.add_note",version="1.0.0"} 1`,
		`toolplane_tool_call_seconds_count{tool="demo.add_note"} 3`,
		`toolplane_authz_denials_total{agent="agent-2",organization="acme"} 2`,
		`toolplane_spend_cents_total{agent="agent-1",organization="acme",tool="search.web"} 14`,
		`toolplane_approvals_pending{organization="acme"} 3`,
		`toolplane_approvals_pending{organization="globex"} 1`,
		`toolplane_uncertain_actions_open{organization="acme"} 2`,
		`toolplane_metric_series{family="toolplane_tool_calls_total"} 4`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	// Only denials are denials, and only metered calls spend.
	if strings.Contains(out, `toolplane_authz_denials_total{agent="agent-1"`) || strings.Contains(out, `toolplane_spend_cents_total{agent="agent-2"`) {
		t.Errorf("a denial or spend recorded for a call that had none:\n%s", out)
	}
	// A failed count leaves its gauge out of the scrape, not the rest.
	mu.Lock()
	fail = true
	mu.Unlock()
	out = scrape(t, m)
	if strings.Contains(out, "toolplane_approvals_pending{") || strings.Contains(out, "toolplane_uncertain_actions_open{") || !strings.Contains(out, "toolplane_tool_calls_total") {
		t.Errorf("a failing count: %s", out)
	}
}

// Each stage a call reached is timed; a stage it did not reach is not
// recorded as an instant one.
func TestStagesRecordedOnlyWhenReached(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	o := call("demo.add_note", "a", "ok", 5*time.Millisecond)
	o.Stages[invoke.StageValidate] = time.Millisecond
	o.Stages[invoke.StageHandler] = 3 * time.Millisecond
	o.Reached = 1<<invoke.StageValidate | 1<<invoke.StageHandler | 1<<invoke.StageAudit
	m.ObserveCall(o)
	out := scrape(t, m)
	for _, want := range []string{
		`toolplane_call_stage_seconds_count{stage="validate"} 1`,
		`toolplane_call_stage_seconds_sum{stage="handler"} 0.003`,
		`toolplane_call_stage_seconds_count{stage="audit"} 1`,
		`toolplane_call_stage_seconds_count{stage="policy"} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// The wait of a decided approval is its filing to its decision, under its
// decision.
func TestApprovalWaitObserved(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	filed := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	m.ApprovalDecided(&toolplane.Approval{Status: toolplane.ApprovalApproved, CreatedAt: filed, ResolvedAt: filed.Add(90 * time.Second)})
	m.ApprovalDecided(&toolplane.Approval{Status: toolplane.ApprovalExpired, CreatedAt: filed, ResolvedAt: filed.Add(time.Hour)})
	// A row without its times (an old one) is not a wait of zero.
	m.ApprovalDecided(&toolplane.Approval{Status: toolplane.ApprovalRejected})
	out := scrape(t, m)
	for _, want := range []string{
		`toolplane_approval_wait_seconds_sum{decision="approved"} 90`,
		`toolplane_approval_wait_seconds_bucket{decision="approved",le="60"} 0`,
		`toolplane_approval_wait_seconds_bucket{decision="approved",le="120"} 1`,
		`toolplane_approval_wait_seconds_sum{decision="expired"} 3600`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(out, `decision="rejected"`) {
		t.Errorf("an approval without times was timed:\n%s", out)
	}
}

// Calls recorded at once, first ones of a series among them, are each
// counted once.
func TestObserveCallConcurrently(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				m.ObserveCall(call("demo.add_note", "a", []string{"ok", "fault"}[i%2], time.Millisecond))
			}
		})
	}
	wg.Wait()
	out := scrape(t, m)
	for _, want := range []string{
		`toolplane_tool_calls_total{agent="a",outcome="ok",tool="demo.add_note",version="1.0.0"} 400`,
		`toolplane_tool_calls_total{agent="a",outcome="fault",tool="demo.add_note",version="1.0.0"} 400`,
		`toolplane_tool_call_seconds_count{tool="demo.add_note"} 800`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// BenchmarkObserveCall is what every call records: a call through every
// stage, metered, in a series seen before.
func BenchmarkObserveCall(b *testing.B) {
	m := New(nil, nil)
	o := call("load.get_item", "agent-1", "ok", 2*time.Millisecond)
	o.CostCents = 3
	for s := range invoke.StageCount {
		o.Stages[s] = time.Duration(s+1) * 10 * time.Microsecond
		o.Reached |= 1 << s
	}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveCall(o)
	}
}

// BenchmarkObserveCallParallel is BenchmarkObserveCall from every core at
// once: the read lock of a seen series is shared.
func BenchmarkObserveCallParallel(b *testing.B) {
	m := New(nil, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		o := call("load.get_item", "agent-1", "ok", 2*time.Millisecond)
		o.Reached = 1<<invoke.StageCount - 1
		for pb.Next() {
			m.ObserveCall(o)
		}
	})
}

// Each rate-limit decision a node took alone, its shared store silent, is
// counted under the store's name.
func TestRateLimitFallbacksCounted(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	fellBack := m.RateLimitFallback("redis")
	fellBack()
	fellBack()
	if want := `toolplane_ratelimit_fallbacks_total{store="redis"} 2`; !strings.Contains(scrape(t, m), want) {
		t.Errorf("scrape lacks %s", want)
	}
}

// Recording a call in series seen before allocates nothing: the metrics
// add no garbage per call in steady state.
func TestObserveCallAllocatesNothing(t *testing.T) {
	m := New(nil, nil)
	o := call("load.get_item", "agent-1", "denied", 2*time.Millisecond)
	o.CostCents = 3
	o.Reached = 1<<invoke.StageCount - 1
	m.ObserveCall(o) // the series' first call looks them up
	if n := testing.AllocsPerRun(1000, func() { m.ObserveCall(o) }); n != 0 {
		t.Errorf("ObserveCall allocates %.1f times per call", n)
	}
}
