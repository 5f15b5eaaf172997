package anomaly_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// store is what the tests write the audit trail to and run the triage
// on.
type store interface {
	toolplane.AuditStore
	toolplane.AnomalyStore
	// AppendAuditBatch writes a window's events in one transaction, as
	// the audit writer does.
	AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
}

// forEachStore runs test on a fresh SQLite store and, when the test
// server is set, on a fresh PostgreSQL schema.
func forEachStore(t *testing.T, test func(t *testing.T, s store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, sqlitetest.New(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := postgres.New(pool)
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		test(t, s)
	})
}

const (
	window = 5 * time.Minute
	settle = time.Minute
	refund = "payments.refund_order"
)

// t0 is the start of the first window the tests write calls in.
var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// world is one test's deployment: a store, a clock, organizations, and
// the nodes running the triage.
type world struct {
	t     *testing.T
	s     store
	clock *testclock.Clock
	nodes []*anomaly.Service
	// next is the window the next calls are written in.
	next int
	rng  *mrand.Rand
}

func newWorld(t *testing.T, s store, nodes int) *world {
	w := &world{t: t, s: s, clock: testclock.New(t0.Add(settle)), rng: mrand.New(mrand.NewPCG(1, 2))}
	for range nodes {
		svc, err := anomaly.New(s, anomaly.Config{Window: window, Settle: settle, Backfill: 2, Now: w.clock.Now,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		w.nodes = append(w.nodes, svc)
	}
	w.step() // the first step folds the (empty) backfill
	return w
}

// call is one kind of call a window holds: n calls of agent's tool with
// outcome, each costing cost cents.
type call struct {
	org, agent, tool, outcome string
	n                         int
	cost                      int64
}

// window writes the calls into the next window, spread over it, moves
// the clock past its end and settling, runs every node's Step at once,
// and answers the items they filed.
func (w *world) window(calls ...call) []toolplane.Anomaly {
	w.t.Helper()
	start := t0.Add(time.Duration(w.next) * window)
	w.next++
	var events []*toolplane.AuditEvent
	for _, c := range calls {
		for range c.n {
			at := start.Add(time.Duration(w.rng.Int64N(int64(window))))
			events = append(events, &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: c.org,
				RunID: fmt.Sprintf("run-%d", len(events)), AgentID: c.agent, Tool: c.tool, Source: toolplane.SourceREST,
				Outcome: c.outcome, CostCents: c.cost, CreatedAt: at})
		}
	}
	if len(events) > 0 {
		if err := w.s.AppendAuditBatch(w.t.Context(), events); err != nil {
			w.t.Fatal(err)
		}
	}
	w.clock.Advance(start.Add(window + settle).Sub(w.clock.Now()))
	return w.step()
}

// step runs every node's Step at once, as nodes meeting would.
func (w *world) step() []toolplane.Anomaly {
	w.t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		filed []toolplane.Anomaly
	)
	for _, n := range w.nodes {
		wg.Go(func() {
			rep, err := n.Step(w.t.Context())
			if err != nil {
				w.t.Errorf("Step = %v", err)
			}
			mu.Lock()
			filed = append(filed, rep.Filed...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if w.t.Failed() {
		w.t.FailNow()
	}
	return filed
}

// noisy answers mean plus or minus up to spread, at random.
func (w *world) noisy(mean, spread int) int {
	return max(0, mean-spread+w.rng.IntN(2*spread+1))
}

// steady is one window of an organization's ordinary traffic: a billing
// agent refunding (now and then refused), and a support agent reading
// orders.
func (w *world) steady(org string) []call {
	return []call{
		{org, "agent-billing", refund, "ok", w.noisy(20, 4), 10},
		{org, "agent-billing", refund, "denied", w.rng.IntN(2), 0},
		{org, "agent-support", "orders.get_order", "ok", w.noisy(40, 6), 1},
		{org, "agent-support", "orders.get_order", "timeout", w.rng.IntN(2), 0},
	}
}

func newOrg() string { return "org-" + rand.Text() }

func auditor(org string) *toolplane.Credential {
	return &toolplane.Credential{ID: "key-" + rand.Text(), OrganizationID: org, Kind: toolplane.CredentialPerson,
		Subject: "ada@example.com", Roles: []string{toolplane.RoleAuditor}}
}

func describe(items []toolplane.Anomaly) string {
	var out string
	for _, a := range items {
		out += fmt.Sprintf("\n  %s %s %s observed %.0f mean %.2f sd %.2f score %.1f", a.AgentID, a.Tool, a.Signal, a.Observed, a.Mean, a.StdDev, a.Score)
	}
	return out
}

// TestBurstOfDeniedRefundsIsFlagged: after two hours of steady traffic, a
// burst of refused refund attempts from one agent files one item for that
// agent, tool and signal; the same burst going on updates it; two nodes
// stepping at once file it once.
func TestBurstOfDeniedRefundsIsFlagged(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		w := newWorld(t, s, 2)
		org := newOrg()
		for range 24 {
			if got := w.window(w.steady(org)...); len(got) != 0 {
				t.Fatalf("steady traffic filed items:%s", describe(got))
			}
		}
		burst := append(w.steady(org), call{org, "agent-billing", refund, "denied", 30, 0})
		filed := w.window(burst...)
		var denial *toolplane.Anomaly
		for i, a := range filed {
			if a.AgentID != "agent-billing" || a.Tool != refund {
				t.Errorf("the burst flagged another agent or tool:%s", describe(filed[i:i+1]))
			}
			if a.Signal == toolplane.SignalDenialRate {
				denial = &filed[i]
			}
		}
		if denial == nil {
			t.Fatalf("the burst of denied refunds filed no denial_rate item; filed:%s", describe(filed))
		}
		if denial.Observed < 30 || denial.Score < anomaly.DefaultThreshold || denial.Mean > 1 || denial.Status != toolplane.AnomalyOpen ||
			denial.OrganizationID != org || !denial.WindowStart.Equal(t0.Add(24*window)) || denial.Windows != 1 {
			t.Fatalf("denial item = %+v", denial)
		}

		// The burst goes on: the open item is updated, no new one filed.
		if again := w.window(append(w.steady(org), call{org, "agent-billing", refund, "denied", 35, 0})...); len(again) != 0 {
			t.Fatalf("a continuing burst filed new items:%s", describe(again))
		}
		got, err := w.nodes[0].Get(t.Context(), denial.ID, auditor(org))
		if err != nil {
			t.Fatal(err)
		}
		if got.Windows != 2 || got.Observed < 35 || !got.WindowStart.Equal(t0.Add(25*window)) {
			t.Fatalf("after a second window the item = %+v, want 2 windows, the latest observed", got)
		}
		open, _, err := w.nodes[1].List(t.Context(), toolplane.AnomalyOpen, "", 100, auditor(org))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range open {
			if a.Signal == toolplane.SignalDenialRate {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d open denial_rate items, want 1:%s", n, describe(open))
		}
	})
}

// TestSteadyWorkloadIsNotFlagged: four hours of noisy but steady traffic
// of two agents file nothing.
func TestSteadyWorkloadIsNotFlagged(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		w := newWorld(t, s, 1)
		org := newOrg()
		for i := range 48 {
			if got := w.window(w.steady(org)...); len(got) != 0 {
				t.Fatalf("window %d of steady traffic filed items:%s", i, describe(got))
			}
		}
	})
}

// TestGrowingWorkloadIsNotFlagged: traffic growing 2% a window (calls,
// refusals and spend alike), about sevenfold over five hours, files
// nothing: the baseline follows it.
func TestGrowingWorkloadIsNotFlagged(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		w := newWorld(t, s, 1)
		org := newOrg()
		for i := range 60 {
			level := 20 * math.Pow(1.02, float64(i))
			calls := []call{
				{org, "agent-billing", refund, "ok", w.noisy(int(level), int(level/5)+1), 10},
				{org, "agent-billing", refund, "denied", w.noisy(int(level/10), 1), 0},
			}
			if got := w.window(calls...); len(got) != 0 {
				t.Fatalf("window %d (level %.0f) of growing traffic filed items:%s", i, level, describe(got))
			}
		}
	})
}

// TestSpendSpikeIsFlagged: the same calls suddenly costing fifty times as
// much file a spend item, and nothing else.
func TestSpendSpikeIsFlagged(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		w := newWorld(t, s, 1)
		org := newOrg()
		for range 20 {
			if got := w.window(w.steady(org)...); len(got) != 0 {
				t.Fatalf("steady traffic filed items:%s", describe(got))
			}
		}
		spike := w.steady(org)
		spike[0].cost = 500
		filed := w.window(spike...)
		if len(filed) != 1 || filed[0].Signal != toolplane.SignalSpend || filed[0].AgentID != "agent-billing" || filed[0].Tool != refund {
			t.Fatalf("the spend spike filed:%s\nwant one spend item of agent-billing's refunds", describe(filed))
		}
	})
}

// TestAcknowledge: an auditor acknowledges an item; an agent's key, a
// person without the role, and another organization's auditor are
// refused, and another organization never sees the item.
func TestAcknowledge(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		w := newWorld(t, s, 1)
		org, other := newOrg(), newOrg()
		for range 14 {
			w.window(append(w.steady(org), w.steady(other)...)...)
		}
		filed := w.window(append(w.steady(other), call{org, "agent-billing", refund, "denied", 40, 0})...)
		if len(filed) == 0 {
			t.Fatal("the burst filed nothing")
		}
		item := filed[0]
		svc := w.nodes[0]
		ctx := t.Context()

		agent := &toolplane.Credential{ID: "key-agent", OrganizationID: org, Kind: toolplane.CredentialAgent, Subject: "agent-billing",
			Roles: []string{toolplane.RoleAuditor}}
		nobody := &toolplane.Credential{ID: "key-bob", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "bob@example.com",
			Roles: []string{toolplane.RoleApprover}}
		for name, by := range map[string]*toolplane.Credential{"an agent": agent, "a person without the role": nobody} {
			var denied *toolplane.DeniedError
			if _, err := svc.Acknowledge(ctx, item.ID, by); !errors.Is(err, anomaly.ErrNotAuthorized) || !errors.As(err, &denied) {
				t.Errorf("Acknowledge as %s = %v, want ErrNotAuthorized", name, err)
			}
			if _, _, err := svc.List(ctx, "", "", 10, by); !errors.Is(err, anomaly.ErrNotAuthorized) {
				t.Errorf("List as %s = %v, want ErrNotAuthorized", name, err)
			}
		}
		// Another organization's auditor sees nothing of it.
		stranger := auditor(other)
		if _, err := svc.Acknowledge(ctx, item.ID, stranger); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("Acknowledge as another organization = %v, want ErrNotFound", err)
		}
		if _, err := svc.Get(ctx, item.ID, stranger); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("Get as another organization = %v, want ErrNotFound", err)
		}
		theirs, _, err := svc.List(ctx, "", "", 100, stranger)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range theirs {
			if a.OrganizationID != other || a.ID == item.ID {
				t.Fatalf("another organization lists %+v", a)
			}
		}
		if _, _, err := svc.List(ctx, "closed", "", 10, auditor(org)); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("List(status closed) = %v, want ErrInvalid", err)
		}

		got, err := svc.Acknowledge(ctx, item.ID, auditor(org))
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != toolplane.AnomalyAcknowledged || got.AcknowledgedBy != "ada@example.com" || !got.AcknowledgedAt.Equal(w.clock.Now()) {
			t.Fatalf("acknowledged item = %+v", got)
		}
		open, _, err := svc.List(ctx, toolplane.AnomalyOpen, "", 100, auditor(org))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range open {
			if a.ID == item.ID {
				t.Fatal("the acknowledged item is still listed open")
			}
		}
		acked, _, err := svc.List(ctx, toolplane.AnomalyAcknowledged, "", 100, auditor(org))
		if err != nil || len(acked) != 1 || acked[0].ID != item.ID {
			t.Fatalf("List(acknowledged) = %+v, %v", acked, err)
		}
	})
}

// TestRestartContinues: a node that stops and another that starts later
// continue the same baselines from the store, so the burst after the
// hand-over is judged against the history before it.
func TestRestartContinues(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		w := newWorld(t, s, 1)
		org := newOrg()
		for range 16 {
			w.window(w.steady(org)...)
		}
		// A new node, nothing in memory, and three windows written while
		// none ran.
		svc, err := anomaly.New(s, anomaly.Config{Window: window, Settle: settle, Now: w.clock.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		w.nodes = nil
		for range 3 {
			w.window(w.steady(org)...)
		}
		w.nodes = []*anomaly.Service{svc}
		filed := w.window(append(w.steady(org), call{org, "agent-billing", refund, "denied", 30, 0})...)
		found := false
		for _, a := range filed {
			found = found || a.Signal == toolplane.SignalDenialRate
		}
		if !found {
			t.Fatalf("after a restart the burst filed:%s", describe(filed))
		}
		rep, err := svc.Step(t.Context())
		if err != nil || rep.Windows != 0 {
			t.Fatalf("a Step with nothing due = %+v, %v; want no window", rep, err)
		}
	})
}

// TestDailyRampIsNotFlagged: an agent busy every working day from 09:00
// and quiet at night rises twelvefold each morning. The first mornings
// are flagged (the rolling baseline knows only the quiet night); once
// the time-of-day profile holds three days of 09:00, the fourth
// morning's ramp is not, while a burst of refusals at 03:00 that night
// still is.
func TestDailyRampIsNotFlagged(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		clock := testclock.New(t0.Add(settle))
		svc, err := anomaly.New(s, anomaly.Config{Window: window, Settle: settle, Backfill: 1, MaxWindows: 300, Now: clock.Now,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		org, rng := newOrg(), mrand.New(mrand.NewPCG(3, 4))
		auditorKey := auditor(org)
		day := func(d int, extra func(w int) int) []toolplane.Anomaly {
			var events []*toolplane.AuditEvent
			for w := range 288 {
				start := t0.Add(time.Duration(d*288+w) * window)
				calls := 4 + rng.IntN(3)
				if h := start.Hour(); h >= 9 && h < 17 {
					calls = 55 + rng.IntN(11)
				}
				denied := 0
				if extra != nil {
					denied = extra(w)
				}
				for i := range calls + denied {
					outcome := "ok"
					if i >= calls {
						outcome = "denied"
					}
					events = append(events, &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: org, RunID: "run",
						AgentID: "agent-desk", Tool: "orders.get_order", Source: toolplane.SourceREST, Outcome: outcome, CostCents: 0,
						CreatedAt: start.Add(time.Duration(rng.Int64N(int64(window))))})
				}
			}
			if err := s.AppendAuditBatch(t.Context(), events); err != nil {
				t.Fatal(err)
			}
			clock.Advance(t0.Add(time.Duration((d+1)*288)*window + settle).Sub(clock.Now()))
			rep, err := svc.Step(t.Context())
			if err != nil || rep.Windows != 288 {
				t.Fatalf("day %d: Step = %d windows, %v", d, rep.Windows, err)
			}
			return rep.Filed
		}
		if filed := day(0, nil); len(filed) == 0 {
			t.Fatal("the first morning's ramp, with no history of mornings, was not flagged")
		}
		for d := 1; d < 3; d++ {
			day(d, nil)
		}
		// A person has looked at what the first mornings filed.
		open, _, err := svc.List(t.Context(), toolplane.AnomalyOpen, "", 100, auditorKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range open {
			if _, err := svc.Acknowledge(t.Context(), a.ID, auditorKey); err != nil {
				t.Fatal(err)
			}
		}
		burst := 3 * 12 // 03:00
		filed := day(3, func(w int) int {
			if w == burst {
				return 40
			}
			return 0
		})
		var night bool
		for _, a := range filed {
			if a.WindowStart.Hour() == 3 {
				// The refused calls are calls too: call_rate may rise
				// with denial_rate.
				night = night || a.Signal == toolplane.SignalDenialRate
				continue
			}
			t.Errorf("the fourth day filed %s at %s (observed %.0f, mean %.1f, score %.1f)", a.Signal, a.WindowStart.Format(time.TimeOnly),
				a.Observed, a.Mean, a.Score)
		}
		if !night {
			t.Fatalf("the burst of refusals at 03:00 was not flagged:%s", describe(filed))
		}
	})
}

// countingStore counts the watermark reads, so a test sees Pending read
// nothing.
type countingStore struct {
	store
	reads atomic.Int64
}

func (c *countingStore) AnomalyWatermark(ctx context.Context) (time.Time, error) {
	c.reads.Add(1)
	return c.store.AnomalyWatermark(ctx)
}

// TestPendingMovesOverQuietWindows: Pending, the periodic job's check,
// reads nothing while no window has settled past the watermark it knows;
// moves the watermark over settled windows without a call, as a Step
// would, answering false; and answers true at a window with a call,
// leaving it to the Step, which then folds it.
func TestPendingMovesOverQuietWindows(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s store) {
		cs := &countingStore{store: s}
		w := newWorld(t, cs, 1)
		svc := w.nodes[0]
		ctx := t.Context()
		mark := func() time.Time {
			t.Helper()
			m, err := s.AnomalyWatermark(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		if got := mark(); !got.Equal(t0) {
			t.Fatalf("the watermark after the first Step is %s, want %s", got, t0)
		}

		reads := cs.reads.Load()
		if due, err := svc.Pending(ctx); err != nil || due {
			t.Fatalf("Pending with no window settled = %v, %v; want false", due, err)
		}
		if n := cs.reads.Load() - reads; n != 0 {
			t.Fatalf("Pending with no window settled read the watermark %d times; want none", n)
		}

		// Three windows settle without a call: moved over, no Step needed.
		w.clock.Advance(3 * window)
		if due, err := svc.Pending(ctx); err != nil || due {
			t.Fatalf("Pending over three quiet windows = %v, %v; want false", due, err)
		}
		if got := mark(); !got.Equal(t0.Add(3 * window)) {
			t.Fatalf("the watermark after Pending over three quiet windows is %s, want %s", got, t0.Add(3*window))
		}

		// A window with a call, then a quiet one: left to the Step.
		org := newOrg()
		if err := s.AppendAuditBatch(ctx, []*toolplane.AuditEvent{{ID: toolplane.NewID("aud_"), OrganizationID: org, RunID: "run",
			AgentID: "agent-billing", Tool: refund, Source: toolplane.SourceREST, Outcome: "ok", CreatedAt: t0.Add(3*window + time.Second)}}); err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(2 * window)
		if due, err := svc.Pending(ctx); err != nil || !due {
			t.Fatalf("Pending with a call in a settled window = %v, %v; want true", due, err)
		}
		if got := mark(); !got.Equal(t0.Add(3 * window)) {
			t.Fatalf("Pending moved the watermark to %s, past a window with a call (%s)", got, t0.Add(3*window))
		}
		rep, err := svc.Step(ctx)
		if err != nil || rep.Windows != 2 || !rep.Through.Equal(t0.Add(5*window)) {
			t.Fatalf("the Step after Pending = %+v, %v; want two windows, through %s", rep, err, t0.Add(5*window))
		}
		bs, err := s.ListAnomalyBaselines(ctx, org)
		if err != nil || len(bs) != 1 {
			t.Fatalf("baselines after the Step = %d, %v; want the call's one", len(bs), err)
		}
		reads = cs.reads.Load()
		if due, err := svc.Pending(ctx); err != nil || due || cs.reads.Load() != reads {
			t.Fatalf("Pending after the Step = %v, %v, %d reads; want false and none", due, err, cs.reads.Load()-reads)
		}
	})
}
