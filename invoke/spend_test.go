package invoke_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/spend"
)

// brokenMeter is a real store whose usage writes fail: the wiring fault
// of a meter that cannot be written (a dropped table, a revoked right).
type brokenMeter struct {
	toolplane.Store
	tried atomic.Int64
}

var errMeterDown = errors.New("usage table not writable")

func (b *brokenMeter) InsertUsage(context.Context, *toolplane.Usage) error {
	b.tried.Add(1)
	return errMeterDown
}

// lockedBuffer is a log sink many calls write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// recordingReporter keeps what it was told.
type recordingReporter struct {
	mu   sync.Mutex
	errs []error
}

func (r *recordingReporter) Report(_ context.Context, _ string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *recordingReporter) reports() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// spendRig is one node's invoker over store running one metered tool.
type spendRig struct {
	iv    *invoke.Invoker
	logs  *lockedBuffer
	rep   *recordingReporter
	clock *testclock.Clock
	runs  atomic.Int64
	known *spend.Known
}

func newSpendRig(t testing.TB, store toolplane.Store, d toolplane.Definition, fn handler.Func) *spendRig {
	t.Helper()
	return newSpendRigKnowing(t, store, d, fn, true)
}

// newSpendRigKnowing is newSpendRig, the node knowing which organizations
// have a daily ceiling (spend.Known) or not.
func newSpendRigKnowing(t testing.TB, store toolplane.Store, d toolplane.Definition, fn handler.Func, knowing bool) *spendRig {
	t.Helper()
	r := &spendRig{logs: &lockedBuffer{}, rep: &recordingReporter{}, clock: newClock()}
	hs := handler.NewRegistry()
	b, err := handler.BindFunc(d.Binding.Handler.Key, func(ctx context.Context, c handler.Call, a any) (any, error) {
		r.runs.Add(1)
		return fn(ctx, c, a)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(b); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	// The node knows which organizations have a daily ceiling, as a
	// server's does: each case below holds with it.
	var ceilings invoke.DailyCeilings
	if knowing {
		r.known = spend.NewKnown(store, r.clock.Now)
		ceilings = r.known
	}
	r.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		Node: "test", LeaseMargin: time.Second, Now: r.clock.Now, Reporter: r.rep, DailyCeilings: ceilings,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pricedAt(cents int64) handler.Func {
	return func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		if err := handler.ReportUsage(ctx, cents, 1); err != nil {
			return nil, err
		}
		return map[string]any{"vendor": "secret-sauce"}, nil
	}
}

// TestMeterFaultFanOutIsFiftyRefusalsFiftyLinesOneReport: fifty metered
// calls at once meet one broken meter. Each answers a platform fault
// carrying none of the vendor's data, each writes one log line, and the
// operator gets one report; a report after ReportEvery counts the calls
// it stands for.
func TestMeterFaultFanOutIsFiftyRefusalsFiftyLinesOneReport(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		meter := &brokenMeter{Store: s}
		rig := newSpendRig(t, meter, metered(), pricedAt(7))
		in := inv("research.search")
		in.OrganizationID = toolplane.NewID("org_")
		var wg sync.WaitGroup
		results := make([]toolplane.Result, 50)
		errs := make([]error, 50)
		for i := range 50 {
			wg.Go(func() {
				results[i], errs[i] = rig.iv.Invoke(context.Background(), "research.search", args("to", fmt.Sprint("q", i)), in)
			})
		}
		wg.Wait()
		for i := range 50 {
			code(t, results[i], errs[i], toolplane.CodeInternalError)
			if results[i].Stop != toolplane.StopFault || results[i].Data != nil || strings.Contains(fmt.Sprint(results[i]), "secret-sauce") {
				t.Fatalf("call %d answered %+v, want a fault without the vendor's data", i, results[i])
			}
		}
		if got := meter.tried.Load(); got != 50 || rig.runs.Load() != 50 {
			t.Fatalf("%d usage writes tried, %d handler runs; want 50 of each", got, rig.runs.Load())
		}
		if n := rig.logs.lines("tool call wiring fault"); n != 50 {
			t.Fatalf("%d fault log lines, want one per call (50)", n)
		}
		if n := rig.logs.lines("level="); n != 50 {
			t.Fatalf("%d log lines in all, want 50:\n%s", n, rig.logs.b.String())
		}
		reps := rig.rep.reports()
		if len(reps) != 1 || !errors.Is(reps[0], invoke.ErrFault) || !errors.Is(reps[0], errMeterDown) {
			t.Fatalf("reports = %v, want one wrapping the meter's fault", reps)
		}
		// Still broken a period later: one more report, counting the
		// 49 calls the first one stood for.
		rig.clock.Advance(invoke.ReportEvery)
		r, err := rig.iv.Invoke(context.Background(), "research.search", args("to", "later"), in)
		code(t, r, err, toolplane.CodeInternalError)
		if reps = rig.rep.reports(); len(reps) != 2 || !strings.Contains(reps[1].Error(), "49 more") {
			t.Fatalf("reports = %v, want a second one counting 49 more", reps)
		}
		if cost, _ := s.RunTreeCost(context.Background(), in.OrganizationID, in.RunID); cost != 0 {
			t.Fatalf("cost = %d, want none recorded", cost)
		}
	})
}

// TestMeterFaultHoldsTheWritesClaim: a write whose usage row cannot be
// written took effect, so its claim is neither released (the next
// identical call would act again) nor completed (it would hand out the
// uncounted answer): it is held, the identical call answers uncertain and
// runs nothing, and the call's audit event says what the caller was told.
func TestMeterFaultHoldsTheWritesClaim(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		d := def("vendor.order", toolplane.EffectWrite, func(d *toolplane.Definition) { d.Metered = true })
		rig := newSpendRig(t, &brokenMeter{Store: s}, d, pricedAt(40))
		in := inv("vendor.order")
		a := args("to", "p1")
		r, err := rig.iv.Invoke(context.Background(), "vendor.order", a, in)
		code(t, r, err, toolplane.CodeInternalError)
		cl, err := s.GetClaim(context.Background(), in.OrganizationID, "vendor.order", invoke.Key(in, hashOf(t, a)))
		if err != nil || cl.Status != toolplane.ClaimUncertain {
			t.Fatalf("claim %+v (%v), want held uncertain", cl, err)
		}
		r, err = rig.iv.Invoke(context.Background(), "vendor.order", a, in)
		code(t, r, err, toolplane.CodeUncertain)
		if rig.runs.Load() != 1 {
			t.Fatalf("handler ran %d times, want once", rig.runs.Load())
		}
		var outcomes []string
		for _, e := range auditOf(t, s) {
			outcomes = append(outcomes, e.Outcome)
		}
		if len(outcomes) == 0 || outcomes[0] != string(toolplane.CodeInternalError) {
			t.Fatalf("audit outcomes %q, want the held call's internal_error first", outcomes)
		}
	})
}

// TestUnpriceableAnswerIsAMeterFault: a handler that says its answer
// cannot be priced gets the same answer as a meter that failed.
func TestUnpriceableAnswerIsAMeterFault(t *testing.T) {
	t.Parallel()
	rig := newSpendRig(t, newStore(t), metered(), func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		_ = handler.ReportUsage(ctx, 3, 1)
		_ = handler.ReportUsageFault(ctx, errors.New("price field missing"))
		return map[string]any{"vendor": "secret-sauce"}, nil
	})
	r, err := rig.iv.Invoke(context.Background(), "research.search", args("to", "q"), inv("research.search"))
	code(t, r, err, toolplane.CodeInternalError)
	if r.Data != nil || len(rig.rep.reports()) != 1 {
		t.Fatalf("result %+v, reports %v", r, rig.rep.reports())
	}
}

// TestMeteredCallCostReachesTheAuditEvent: the usage row's cost is the
// call's audit event's cost, and the row names its agent.
func TestMeteredCallCostReachesTheAuditEvent(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		rig := newSpendRig(t, s, metered(), pricedAt(33))
		in := inv("research.search")
		must(t).OK(rig.iv.Invoke(context.Background(), "research.search", args("to", "q"), in))
		evs := auditOf(t, s)
		if len(evs) != 1 || evs[0].CostCents != 33 {
			t.Fatalf("audit %+v, want one event costing 33", evs)
		}
		lines, err := s.SpendReport(context.Background(), in.OrganizationID, rig.clock.Now().Add(-time.Hour), rig.clock.Now().Add(time.Hour), toolplane.SpendByAgent, 10)
		if err != nil || len(lines) != 1 || lines[0] != (toolplane.SpendLine{Key: "agent-1", Calls: 1, CostCents: 33}) {
			t.Fatalf("report %+v (%v)", lines, err)
		}
	})
}

// TestDailyCeilingRefusesOnceReached: the organization's daily ceiling
// refuses a metered call once the day's spend reached it, naming the
// ceiling and the spend; another organization, and the next UTC day, are
// not refused.
func TestDailyCeilingRefusesOnceReached(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		ctx := context.Background()
		rig := newSpendRig(t, s, metered(), pricedAt(60))
		in := inv("research.search")
		in.OrganizationID = toolplane.NewID("org_")
		putCeiling(t, s, in.OrganizationID, 100, rig.clock.Now())
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "a"), in))
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "b"), in))
		r, err := rig.iv.Invoke(ctx, "research.search", args("to", "c"), in)
		code(t, r, err, toolplane.CodeBudgetExhausted)
		if r.Stop != toolplane.StopBudgetExhausted || !strings.Contains(r.Error.Message, "100 cents") || !strings.Contains(r.Error.Message, "120 cents spent") {
			t.Fatalf("refusal %+v, want the ceiling and the spend named", r.Error)
		}
		if rig.runs.Load() != 2 {
			t.Fatalf("%d runs, want 2", rig.runs.Load())
		}
		other := inv("research.search")
		other.OrganizationID = toolplane.NewID("org_")
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "c"), other))
		rig.clock.Advance(12 * time.Hour) // past midnight, UTC
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "d"), in))
	})
}

func putCeiling(t *testing.T, s toolplane.Store, org string, cents int64, at time.Time) {
	t.Helper()
	err := s.PutSpendCeiling(context.Background(), &toolplane.SpendCeiling{OrganizationID: org, DailyCents: cents, UpdatedBy: "admin", UpdatedAt: at},
		&toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: org, Kind: "spend_ceiling.set", Subject: "spend", Actor: "admin", Detail: []byte(`{}`), CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTwoNodesRaceAgainstOneDailyCeiling: two invokers over one store
// (two nodes on one PostgreSQL, or one SQLite file) spend against one
// organization's day at once; the day ends past its ceiling by at most one
// call per node, and the counter equals the rows.
func TestTwoNodesRaceAgainstOneDailyCeiling(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		ctx := context.Background()
		const price, ceiling = 7, 100
		nodes := []*spendRig{newSpendRig(t, s, metered(), pricedAt(price)), newSpendRig(t, s, metered(), pricedAt(price))}
		org := toolplane.NewID("org_")
		putCeiling(t, s, org, ceiling, nodes[0].clock.Now())
		var wg sync.WaitGroup
		for n, node := range nodes {
			wg.Go(func() {
				in := inv("research.search")
				in.OrganizationID, in.RunID = org, fmt.Sprint("run-", n)
				for i := 0; ; i++ {
					r, err := node.iv.Invoke(ctx, "research.search", args("to", fmt.Sprint(i)), in)
					if err != nil {
						t.Error(err)
						return
					}
					if !r.OK {
						if r.Error.Code != toolplane.CodeBudgetExhausted {
							t.Errorf("node %d: %+v", n, r.Error)
						}
						return
					}
				}
			})
		}
		wg.Wait()
		day, err := s.DaySpend(ctx, org, toolplane.SpendDay(nodes[0].clock.Now()))
		if err != nil {
			t.Fatal(err)
		}
		runs := nodes[0].runs.Load() + nodes[1].runs.Load()
		if day.SpentCents < ceiling || day.SpentCents > ceiling+int64(len(nodes))*price || day.Calls != runs || day.SpentCents != runs*price {
			t.Fatalf("spent %d in %d calls (%d runs), want %d..%d", day.SpentCents, day.Calls, runs, ceiling, ceiling+2*price)
		}
		lines, err := s.SpendReport(ctx, org, nodes[0].clock.Now().Add(-time.Hour), nodes[0].clock.Now().Add(time.Hour), toolplane.SpendByTool, 10)
		if err != nil || len(lines) != 1 || lines[0].CostCents != day.SpentCents || lines[0].Calls != day.Calls {
			t.Fatalf("report %+v (%v), want the counter's %+v", lines, err, day)
		}
	})
}

// countedDays counts the reads of the day's counter.
type countedDays struct {
	toolplane.Store
	reads atomic.Int64
}

func (c *countedDays) DaySpend(ctx context.Context, org string, day int64) (toolplane.DaySpend, error) {
	c.reads.Add(1)
	return c.Store.DaySpend(ctx, org, day)
}

// TestDailyCounterReadOnlyUnderACeiling: a metered call of an
// organization without a daily ceiling does not read the day's counter;
// once a ceiling is set on another node (in the store, behind this
// node's back) it is enforced here within spend.DefaultKnownFor, and
// from then on the counter is read on every call; set through this
// node's service, at once.
func TestDailyCounterReadOnlyUnderACeiling(t *testing.T) {
	t.Parallel()
	onStores(t, func(t *testing.T, s toolplane.Store) {
		ctx := context.Background()
		counted := &countedDays{Store: s}
		rig := newSpendRig(t, counted, metered(), pricedAt(60))
		in := inv("research.search")
		in.OrganizationID = toolplane.NewID("org_")
		for i := range 3 {
			must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", fmt.Sprint(i)), in))
		}
		if n := counted.reads.Load(); n != 0 {
			t.Fatalf("%d reads of the day's counter with no ceiling, want none", n)
		}
		putCeiling(t, s, in.OrganizationID, 100, rig.clock.Now()) // another node's doing
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "x"), in))
		rig.clock.Advance(spend.DefaultKnownFor)
		r, err := rig.iv.Invoke(ctx, "research.search", args("to", "y"), in)
		code(t, r, err, toolplane.CodeBudgetExhausted)
		if n := counted.reads.Load(); n != 1 {
			t.Fatalf("%d reads of the day's counter, want 1", n)
		}

		// Set through this node's service: known at once.
		other := inv("research.search")
		other.OrganizationID = toolplane.NewID("org_")
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "a"), other))
		must(t).OK(rig.iv.Invoke(ctx, "research.search", args("to", "b"), other))
		svc := spend.New(s, rig.clock.Now)
		svc.Tell(rig.known)
		admin := &toolplane.Credential{ID: "key_admin", OrganizationID: other.OrganizationID, Kind: toolplane.CredentialPerson, Subject: "admin", Roles: []string{toolplane.RolePlatformAdmin}}
		if _, err := svc.SetCeiling(ctx, admin, 100); err != nil {
			t.Fatal(err)
		}
		r, err = rig.iv.Invoke(ctx, "research.search", args("to", "c"), other)
		code(t, r, err, toolplane.CodeBudgetExhausted)
	})
}

// BenchmarkMeteredCall is a metered read on SQLite, priced and recorded,
// of an organization with no daily ceiling: with the node not knowing
// that (the day's counter read before each call) and knowing it
// (spend.Known, the counter not read). cpu-µs/op is the process's CPU a
// call, the steadier figure on a shared machine.
func BenchmarkMeteredCall(b *testing.B) {
	for _, bc := range []struct {
		name  string
		known bool
	}{{"counter_read", false}, {"no_ceiling_known", true}} {
		b.Run(bc.name, func(b *testing.B) {
			rig := newSpendRigKnowing(b, newStore(b), metered(), pricedAt(3), bc.known)
			in := inv("research.search")
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if r, err := rig.iv.Invoke(ctx, "research.search", args("to", "a"), in); err != nil || !r.OK {
					b.Fatal(r, err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
