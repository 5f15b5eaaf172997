package signals_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/signals"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
)

// calls tells k of n calls of org's tool ending with outcome.
func calls(k *signals.Keeper, org, tool, outcome string, n int) {
	for range n {
		k.ObserveCall(&invoke.Observation{Organization: org, Agent: "a", Tool: tool, Version: "1.0.0", Outcome: outcome})
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	type want struct {
		org, tool string
		h         float64
		ok        bool
	}
	tests := []struct {
		name  string
		setup func(k *signals.Keeper, tr *resilience.Traffic, c *testclock.Clock)
		want  []want
	}{
		{"nothing known", func(*signals.Keeper, *resilience.Traffic, *testclock.Clock) {},
			[]want{{"org_a", "crm.lookup", 0, false}}},
		{"too few calls say nothing", func(k *signals.Keeper, _ *resilience.Traffic, _ *testclock.Clock) {
			calls(k, "org_a", "crm.lookup", "fault", 4)
		}, []want{{"org_a", "crm.lookup", 0, false}}},
		{"the share of calls that did not fail", func(k *signals.Keeper, _ *resilience.Traffic, _ *testclock.Clock) {
			calls(k, "org_a", "crm.lookup", "ok", 6)
			calls(k, "org_a", "crm.lookup", string(toolplane.CodeTimeout), 2)
			// The caller's mistakes and refusals are not the tool's.
			calls(k, "org_a", "crm.lookup", string(toolplane.CodeInvalidInput), 50)
			calls(k, "org_a", "crm.lookup", string(toolplane.CodeDenied), 50)
		}, []want{{"org_a", "crm.lookup", 0.75, true}}},
		{"one organization's failures are its own", func(k *signals.Keeper, _ *resilience.Traffic, _ *testclock.Clock) {
			calls(k, "org_a", "crm.lookup", "fault", 10)
			calls(k, "org_b", "crm.lookup", "ok", 10)
		}, []want{{"org_a", "crm.lookup", 0, true}, {"org_b", "crm.lookup", 1, true}, {"org_c", "crm.lookup", 0, false}}},
		{"the window forgets", func(k *signals.Keeper, _ *resilience.Traffic, c *testclock.Clock) {
			calls(k, "org_a", "crm.lookup", "fault", 10)
			c.Advance(2 * time.Hour)
		}, []want{{"org_a", "crm.lookup", 0, false}}},
		{"an open breaker is 0 whatever the calls", func(k *signals.Keeper, tr *resilience.Traffic, _ *testclock.Clock) {
			calls(k, "org_a", "crm.lookup", "ok", 10)
			b := tr.Breaker("org_a", "crm.lookup", "crm.example")
			for range 4 {
				b.Record(resilience.Failure, false)
			}
		}, []want{{"org_a", "crm.lookup", 0, true}, {"org_b", "crm.lookup", 0, false}}},
		{"a closed breaker's own window counts", func(k *signals.Keeper, tr *resilience.Traffic, _ *testclock.Clock) {
			b := tr.Breaker("org_a", "crm.lookup", "crm.example")
			for range 9 {
				b.Record(resilience.Success, false)
			}
			b.Record(resilience.Failure, false)
		}, []want{{"org_a", "crm.lookup", 0.9, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
			tr := resilience.New(resilience.Config{Now: c.Now, Breaker: resilience.BreakerConfig{MinSamples: 4, Window: time.Minute}})
			k := signals.New(signals.Config{Traffic: tr, Now: c.Now})
			tt.setup(k, tr, c)
			for _, w := range tt.want {
				h, ok := k.Health(w.org, w.tool)
				if ok != w.ok || (ok && (h < w.h-1e-9 || h > w.h+1e-9)) {
					t.Errorf("Health(%s, %s) = %v, %t; want %v, %t", w.org, w.tool, h, ok, w.h, w.ok)
				}
			}
		})
	}
}

func TestPopularity(t *testing.T) {
	t.Parallel()
	c := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	off := signals.New(signals.Config{Now: c.Now})
	on := signals.New(signals.Config{Popularity: true, Now: c.Now})
	for _, k := range []*signals.Keeper{off, on} {
		calls(k, "org_a", "crm.lookup", "ok", 100)
		calls(k, "org_a", "crm.update", "ok", 3)
		calls(k, "org_b", "crm.update", "ok", 1)
	}
	if p := off.Popularity("org_a", "crm.lookup"); p != 0 {
		t.Errorf("popularity off: %v, want 0", p)
	}
	top, low := on.Popularity("org_a", "crm.lookup"), on.Popularity("org_a", "crm.update")
	if top != 1 || !(low > 0 && low < top) {
		t.Errorf("org_a: lookup %v, update %v; want 1 and between", top, low)
	}
	// org_b's one call makes crm.update its most used: its own scale.
	if p := on.Popularity("org_b", "crm.update"); p != 1 {
		t.Errorf("org_b's only tool: %v, want 1", p)
	}
	if p := on.Popularity("org_b", "crm.lookup"); p != 0 {
		t.Errorf("org_b's uncalled tool: %v, want 0 (org_a's calls are not org_b's)", p)
	}
	c.Advance(2 * time.Hour)
	if p := on.Popularity("org_a", "crm.lookup"); p != 0 {
		t.Errorf("after the window: %v, want 0", p)
	}
}

// TestMaxTools: the tools counted are bounded; once the window forgets
// some, new ones are counted again.
func TestMaxTools(t *testing.T) {
	t.Parallel()
	c := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	k := signals.New(signals.Config{MaxTools: 2, MinCalls: 1, Now: c.Now})
	calls(k, "org_a", "t1", "ok", 1)
	calls(k, "org_a", "t2", "ok", 1)
	calls(k, "org_a", "t3", "ok", 1)
	if _, ok := k.Health("org_a", "t3"); ok {
		t.Error("a third tool was counted past MaxTools 2")
	}
	c.Advance(2 * time.Hour)
	calls(k, "org_a", "t3", "ok", 1)
	if _, ok := k.Health("org_a", "t3"); !ok {
		t.Error("a tool was not counted once the window forgot the others")
	}
}

// TestSearchSinksAFailingTool: of two tools matching a query alike, the
// one whose breaker is open in the caller's organization ranks below the
// other there, and not in another organization.
func TestSearchSinksAFailingTool(t *testing.T) {
	t.Parallel()
	c := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	tr := resilience.New(resilience.Config{Now: c.Now, Breaker: resilience.BreakerConfig{MinSamples: 4, Window: time.Minute}})
	k := signals.New(signals.Config{Traffic: tr, Now: c.Now})
	def := func(name string) toolplane.Definition {
		return toolplane.Definition{Name: name, Version: "1.0.0", Kind: toolplane.KindInternal, Effect: toolplane.EffectRead,
			Description: "Look up a customer's shipping address.", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
			Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}}}
	}
	reg, _, err := registry.Build([]toolplane.Definition{def("crm.address_a"), def("crm.address_b")},
		registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"crm.address_a": false, "crm.address_b": false}}})
	if err != nil {
		t.Fatal(err)
	}
	x := discovery.New(discovery.Options{Signals: k})
	x.Follow(reg)
	first := func(org string) string {
		res, err := x.Search(context.Background(), org, reg.Tools(org), discovery.Query{Text: "customer shipping address"})
		if err != nil || len(res.Matches) != 2 {
			t.Fatalf("search in %s: %+v %v", org, res, err)
		}
		return res.Matches[0].Name
	}
	if got := first("org_a"); got != "crm.address_a" {
		t.Fatalf("before any failure %s ranks first, want crm.address_a (by name)", got)
	}
	b := tr.Breaker("org_a", "crm.address_a", "crm")
	for range 4 {
		b.Record(resilience.Failure, false)
	}
	c.Advance(2 * time.Second) // past the snapshot's staleness
	if got := first("org_a"); got != "crm.address_b" {
		t.Errorf("with crm.address_a's breaker open, %s ranks first in org_a", got)
	}
	if got := first("org_b"); got != "crm.address_a" {
		t.Errorf("org_a's open breaker moved org_b's ranking: %s first", got)
	}
}

// BenchmarkSearchSignals: a search over 10,000 versions, with no signals
// and with a Keeper holding calls of every tool and a breaker of every
// tenth, so the cost the signals add to a search is measured.
func BenchmarkSearchSignals(b *testing.B) {
	words := strings.Fields("order invoice customer ticket refund shipment address payment account report user email note schedule meeting file upload search list create update delete export import")
	var defs []toolplane.Definition
	handlers := map[string]bool{}
	for i := range 10000 {
		name := fmt.Sprintf("svc%d.tool_%d", i%200, i)
		d := toolplane.Definition{Name: name, Version: "1.0.0", Kind: toolplane.KindInternal, Effect: toolplane.EffectRead,
			Description: fmt.Sprintf("%s the %s of a %s by its %s.", words[i%len(words)], words[(i/3)%len(words)], words[(i/7)%len(words)], words[(i/11)%len(words)]),
			InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
			Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}}}
		defs = append(defs, d)
		handlers[name] = false
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		b.Fatal(err)
	}
	tr := resilience.New(resilience.Config{})
	health := signals.New(signals.Config{Traffic: tr})
	popular := signals.New(signals.Config{Traffic: tr, Popularity: true})
	for i, d := range defs {
		for _, k := range []*signals.Keeper{health, popular} {
			calls(k, "org_a", d.Name, "ok", 1+i%7)
		}
		if i%10 == 0 {
			tr.Breaker("org_a", d.Name, "t").Record(resilience.Success, false)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go health.Run(ctx)
	go popular.Run(ctx)
	cands := reg.Tools("org_a")
	for _, tc := range []struct {
		name string
		opt  discovery.Options
	}{{"none", discovery.Options{}}, {"health", discovery.Options{Signals: health}}, {"health+popularity", discovery.Options{Signals: popular}}} {
		x := discovery.New(tc.opt)
		x.Rebuild(reg.Every())
		q := discovery.Query{Text: "refund the payment of a customer"}
		if _, err := x.Search(context.Background(), "org_a", cands, q); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := x.Search(context.Background(), "org_a", cands, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMaxToolsPerOrganization: one organization calling many tools fills
// its own share, never the room another's tools are counted in.
func TestMaxToolsPerOrganization(t *testing.T) {
	t.Parallel()
	c := testclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	k := signals.New(signals.Config{MaxTools: 10, MaxToolsPerOrganization: 3, MinCalls: 1, Now: c.Now})
	for i := range 8 {
		calls(k, "org_noisy", fmt.Sprintf("t%d", i), "ok", 1)
	}
	if _, ok := k.Health("org_noisy", "t3"); ok {
		t.Error("a fourth tool of one organization was counted past its share of 3")
	}
	calls(k, "org_quiet", "crm.lookup", "ok", 1)
	c.Advance(2 * signals.DefaultStale) // past the snapshot the first read took
	if _, ok := k.Health("org_quiet", "crm.lookup"); !ok {
		t.Error("another organization's tool was not counted while the noisy one held its share")
	}
	c.Advance(2 * time.Hour)
	calls(k, "org_noisy", "t7", "ok", 1)
	if _, ok := k.Health("org_noisy", "t7"); !ok {
		t.Error("once the window forgot its tools, the organization's new one was not counted")
	}
}

// TestRunRestsWhileNothingIsKnown: Run takes no snapshot of a keeper
// that knows nothing until a call is observed (an idle node does not wake
// every Stale), and then takes them again every Stale while something is
// known, so the call's count is read within a Stale or two.
func TestRunRestsWhileNothingIsKnown(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	k := signals.New(signals.Config{Stale: time.Millisecond, MinCalls: 1, Now: func() time.Time {
		reads.Add(1)
		return time.Now()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	// The first snapshot, and the one a Stale later that found nothing:
	// a hundred Stales passed.
	if n := reads.Load(); n > 2 {
		t.Errorf("%d snapshots of a keeper that knows nothing in 100 Stales; want at most 2", n)
	}
	calls(k, "org_a", "crm.read", "fault", 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if h, ok := k.Health("org_a", "crm.read"); ok && h == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failed call was never read into the snapshot")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
