package traffic_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/traffic"
)

// store is a store with the traffic reads.
type store interface {
	toolplane.Store
	toolplane.TrafficStore
}

// stores answers the stores a test runs on: a SQLite file always,
// PostgreSQL (a schema of the test's own) when the test server is set.
func stores(t testing.TB) map[string]func(t testing.TB) store {
	out := map[string]func(t testing.TB) store{
		"sqlite": func(t testing.TB) store {
			s, _ := sqlitetest.OpenDB(t, filepath.Join(t.TempDir(), "toolplane.db"))
			return s
		},
	}
	if _, ok := pgtest.LookupDSN(); ok {
		out["postgres"] = func(t testing.TB) store {
			pool, err := pgxpool.New(context.Background(), pgtest.SchemaDSN(t, pgtest.DSN(t)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := postgres.New(pool)
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	return out
}

func person(org string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "key_" + org, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "someone", Roles: roles}
}

// now is the clock of the tests: 12:30:20 on a day, so the hour's steps
// end at 12:31.
var now = time.Date(2026, 5, 4, 12, 30, 20, 0, time.UTC)

func call(org string, i int, tool, agent, outcome string, latency time.Duration, cost int64, ago time.Duration) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{ID: fmt.Sprintf("aud_%s_%d", org, i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i),
		AgentID: agent, Tool: tool, Source: toolplane.SourceREST, Outcome: outcome, LatencyMicros: latency.Microseconds(),
		CostCents: cost, CreatedAt: now.Add(-ago)}
}

func TestOverview(t *testing.T) {
	t.Parallel()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			var evs []*toolplane.AuditEvent
			// In the last hour: 10 calls of pay.refund by agent-a, 8 ok at
			// 2 ms, one timeout at 3 s, one denied; 4 of crm.lookup by
			// agent-b at 40 ms, one held for approval; their costs.
			for i := range 8 {
				evs = append(evs, call("org-1", i, "pay.refund", "agent-a", "ok", 2*time.Millisecond, 5, time.Duration(i)*time.Minute))
			}
			evs = append(evs, call("org-1", 8, "pay.refund", "agent-a", "timeout", 3*time.Second, 0, 10*time.Minute),
				call("org-1", 9, "pay.refund", "agent-a", "denied", 0, 0, 11*time.Minute))
			for i := range 3 {
				evs = append(evs, call("org-1", 10+i, "crm.lookup", "agent-b", "ok", 40*time.Millisecond, 1, 20*time.Minute))
			}
			evs = append(evs, call("org-1", 13, "crm.lookup", "agent-b", "approval_required", 0, 0, 25*time.Minute))
			// Earlier today: 5 more ok calls of crm.lookup; yesterday: one
			// (out of the day).
			for i := range 5 {
				evs = append(evs, call("org-1", 20+i, "crm.lookup", "agent-b", "ok", 40*time.Millisecond, 1, 5*time.Hour))
			}
			evs = append(evs, call("org-1", 30, "crm.lookup", "agent-b", "ok", 40*time.Millisecond, 1, 25*time.Hour))
			// The other organization: busy, failing and dear, at the same
			// times and of the same tools.
			for i := range 50 {
				evs = append(evs, call("org-2", i, "pay.refund", "agent-a", "internal_error", time.Second, 100, time.Duration(i)*time.Minute))
			}
			for _, e := range evs {
				if err := s.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			svc := traffic.New(s, func() time.Time { return now })
			auditor := person("org-1", toolplane.RoleAuditor)

			hour, err := svc.Overview(ctx, auditor, traffic.Hour, "")
			if err != nil {
				t.Fatal(err)
			}
			tot := hour.Total
			if tot.Calls != 13 || tot.Failed != 1 || tot.Refused != 1 || tot.Held != 1 || tot.CostCents != 43 {
				t.Errorf("hour total = %+v, want 13 calls, 1 failed, 1 refused, 1 held, 43 cents", tot)
			}
			if r := tot.ErrorRate(); r < 1.0/13-1e-9 || r > 1.0/13+1e-9 {
				t.Errorf("error rate = %v, want 1/13", r)
			}
			// 11 calls ran at 2 ms (8) and 40 ms (3), one at 3 s: the
			// median is in 2 ms's bucket, the 95th and 99th percentiles in
			// 3 s's.
			if tot.P50 < 1500*time.Microsecond || tot.P50 > 2500*time.Microsecond {
				t.Errorf("p50 = %s, want in [1.5ms, 2.5ms)", tot.P50)
			}
			if tot.P95 < 2500*time.Millisecond || tot.P95 > 4*time.Second || tot.P99 < tot.P95 {
				t.Errorf("p95 = %s, p99 = %s: want in [2.5s, 4s), p99 no lower", tot.P95, tot.P99)
			}
			if len(hour.Tools) != 2 || hour.Tools[0].Name != "pay.refund" || hour.Tools[0].Calls != 10 || hour.Tools[0].CostCents != 40 ||
				hour.Tools[1].Name != "crm.lookup" || hour.Tools[1].Calls != 3 || hour.Tools[1].Held != 1 {
				t.Errorf("hour tools = %+v", hour.Tools)
			}
			if len(hour.Agents) != 2 || hour.Agents[0].Name != "agent-a" || hour.Agents[0].Calls != 10 || hour.Agents[1].Name != "agent-b" {
				t.Errorf("hour agents = %+v", hour.Agents)
			}
			if len(hour.Steps) != 60 || !hour.Steps[59].Start.Equal(time.Date(2026, 5, 4, 12, 30, 0, 0, time.UTC)) || !hour.Until.Equal(now.Truncate(time.Minute).Add(time.Minute)) {
				t.Errorf("hour steps: %d, last at %s, until %s", len(hour.Steps), hour.Steps[len(hour.Steps)-1].Start, hour.Until)
			}
			var stepCalls, stepCost int64
			for _, st := range hour.Steps {
				stepCalls += st.Calls
				stepCost += st.CostCents
			}
			if stepCalls != tot.Calls || stepCost != tot.CostCents {
				t.Errorf("the steps count %d calls and %d cents, the total %d and %d", stepCalls, stepCost, tot.Calls, tot.CostCents)
			}

			day, err := svc.Overview(ctx, auditor, traffic.Day, "")
			if err != nil {
				t.Fatal(err)
			}
			if day.Total.Calls != 18 || day.Total.CostCents != 48 || len(day.Steps) != 48 {
				t.Errorf("day: %d calls, %d cents, %d steps; want 18, 48, 48", day.Total.Calls, day.Total.CostCents, len(day.Steps))
			}

			// Read again: the day's steps that are over are counted once
			// and kept; a call answered since, in the step now is in, is
			// counted at once.
			late := call("org-1", 40, "pay.refund", "agent-a", "ok", 2*time.Millisecond, 7, time.Minute)
			sealed := call("org-1", 41, "pay.refund", "agent-a", "ok", 2*time.Millisecond, 7, 5*time.Hour)
			for _, e := range []*toolplane.AuditEvent{late, sealed} {
				if err := s.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			again, err := svc.Overview(ctx, auditor, traffic.Day, "")
			if err != nil {
				t.Fatal(err)
			}
			if again.Total.Calls != 19 || again.Total.CostCents != 55 {
				t.Errorf("the day read again: %d calls, %d cents; want 19 and 55 (the new call; not the one stored late in a step already counted)",
					again.Total.Calls, again.Total.CostCents)
			}
			if fresh, err := traffic.New(s, func() time.Time { return now }).Overview(ctx, auditor, traffic.Day, ""); err != nil || fresh.Total.Calls != 20 {
				t.Errorf("a new service's day: %+v, %v; want 20 calls, the trail as it is", fresh, err)
			}

			one, err := svc.Overview(ctx, auditor, traffic.Day, "crm.lookup")
			if err != nil {
				t.Fatal(err)
			}
			if one.Total.Calls != 8 || one.Total.Held != 1 || len(one.Tools) != 1 || one.Tools[0].Name != "crm.lookup" {
				t.Errorf("crm.lookup's day = %+v, tools %+v", one.Total, one.Tools)
			}

			// The other organization's auditor sees its own calls alone.
			theirs, err := svc.Overview(ctx, person("org-2", toolplane.RoleAuditor), traffic.Hour, "")
			if err != nil {
				t.Fatal(err)
			}
			if theirs.Total.Calls != 50 || theirs.Total.Failed != 50 || theirs.Total.CostCents != 5000 {
				t.Errorf("org-2's hour = %+v, want its 50 failed calls alone", theirs.Total)
			}
			theirDay, err := svc.Overview(ctx, person("org-2", toolplane.RoleAuditor), traffic.Day, "pay.refund")
			if err != nil {
				t.Fatal(err)
			}
			if theirDay.Total.Calls != 50 || theirDay.Total.CostCents != 5000 {
				t.Errorf("org-2's day of pay.refund = %+v, want its 50 calls alone", theirDay.Total)
			}
		})
	}
}

func TestOverviewRefuses(t *testing.T) {
	t.Parallel()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc := traffic.New(open(t), func() time.Time { return now })
			ctx := context.Background()
			for _, tc := range []struct {
				name   string
				by     *toolplane.Credential
				window traffic.Window
				tool   string
				want   error
			}{
				{"an approver", person("org-1", toolplane.RoleApprover), traffic.Hour, "", toolplane.ErrForbidden},
				{"an agent operator", person("org-1", toolplane.RoleAgentOperator), traffic.Day, "", toolplane.ErrForbidden},
				{"an agent", &toolplane.Credential{ID: "key_a", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-a"}, traffic.Hour, "", toolplane.ErrForbidden},
				{"a window of a week", person("org-1", toolplane.RoleAuditor), traffic.Window("week"), "", toolplane.ErrInvalid},
				{"a tool name too long", person("org-1", toolplane.RoleAuditor), traffic.Hour, string(make([]byte, toolplane.MaxNameLen+1)), toolplane.ErrInvalid},
			} {
				if _, err := svc.Overview(ctx, tc.by, tc.window, tc.tool); !errors.Is(err, tc.want) {
					t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
				}
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	n := len(toolplane.TrafficLatencyBounds) + 1
	counts := func(set map[int]int64) []int64 {
		c := make([]int64, n)
		for i, v := range set {
			c[i] = v
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		counts   []int64
		q        float64
		min, max time.Duration
	}{
		{"none", counts(nil), 0.5, 0, 0},
		{"one bucket, median halfway", counts(map[int]int64{3: 10}), 0.5, 750 * time.Microsecond, 750 * time.Microsecond},
		{"one bucket, top", counts(map[int]int64{3: 10}), 1, time.Millisecond, time.Millisecond},
		{"the slow tail", counts(map[int]int64{3: 99, 20: 1}), 0.995, 1500 * time.Millisecond, 2500 * time.Millisecond},
		{"past the last bound", counts(map[int]int64{n - 1: 4}), 0.5, 60 * time.Second, 60 * time.Second},
		{"the first bucket", counts(map[int]int64{0: 2}), 0.5, 50 * time.Microsecond, 50 * time.Microsecond},
	} {
		if got := traffic.Quantile(tc.counts, tc.q); got < tc.min || got > tc.max {
			t.Errorf("%s: Quantile(%v) = %s, want in [%s, %s]", tc.name, tc.q, got, tc.min, tc.max)
		}
	}
	for _, micros := range []int64{0, 99, 100, 1_000, 59_999_999, 60_000_000, 1 << 40} {
		b := toolplane.TrafficLatencyBucket(micros)
		if b < len(toolplane.TrafficLatencyBounds) && micros >= toolplane.TrafficLatencyBounds[b] || b > 0 && micros < toolplane.TrafficLatencyBounds[b-1] {
			t.Errorf("TrafficLatencyBucket(%d) = %d: outside its bounds", micros, b)
		}
	}
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	for _, c := range toolplane.Codes {
		k := traffic.KindOf(string(c))
		if k != traffic.Failed && k != traffic.Refused {
			t.Errorf("code %s counts as %d: every stable code is a failure or a refusal", c, k)
		}
	}
	for outcome, want := range map[string]traffic.Kind{"ok": traffic.Answered, "approval_required": traffic.Held,
		"timeout": traffic.Failed, "internal_error": traffic.Failed, "denied": traffic.Refused, "rate_limited": traffic.Refused} {
		if got := traffic.KindOf(outcome); got != want {
			t.Errorf("KindOf(%s) = %d, want %d", outcome, got, want)
		}
	}
}

// counting counts the cell reads of a half hour's step.
type counting struct {
	toolplane.TrafficStore
	mu       sync.Mutex
	sealedAt map[time.Time]int
}

func (c *counting) TrafficCells(ctx context.Context, q toolplane.TrafficQuery) ([]toolplane.TrafficCell, error) {
	if q.Until.Sub(q.From) == 30*time.Minute {
		c.mu.Lock()
		c.sealedAt[q.From]++
		c.mu.Unlock()
	}
	return c.TrafficStore.TrafficCells(ctx, q)
}

// TestSealedStepsAreBounded: a finished half hour is counted once and
// kept, unless it holds more tools × agents × outcomes than a step is
// kept for (4,096 cells), which is counted again at each view: an
// organization with thousands of agents costs time, never the node's
// memory, and its figures stay right.
func TestSealedStepsAreBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: stores 4,200 events")
	}
	s, _ := sqlitetest.OpenDB(t, filepath.Join(t.TempDir(), "toolplane.db"))
	ctx := context.Background()
	// Three hours ago: 4,200 agents one call each (a step past the bound);
	// five hours ago: one call (a step kept).
	for i := range 4200 {
		if err := s.AppendAudit(ctx, call("org-1", i, "crm.lookup", fmt.Sprintf("agent-%d", i), "ok", time.Millisecond, 0, 3*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendAudit(ctx, call("org-1", 5000, "crm.lookup", "agent-x", "ok", time.Millisecond, 0, 5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	c := &counting{TrafficStore: s, sealedAt: map[time.Time]int{}}
	svc := traffic.New(c, func() time.Time { return now })
	by := person("org-1", toolplane.RoleAuditor)
	for range 2 {
		o, err := svc.Overview(ctx, by, traffic.Day, "")
		if err != nil {
			t.Fatal(err)
		}
		if o.Total.Calls != 4201 {
			t.Fatalf("the day counted %d calls, want 4201", o.Total.Calls)
		}
	}
	big, small := now.Add(-3*time.Hour).Truncate(30*time.Minute), now.Add(-5*time.Hour).Truncate(30*time.Minute)
	if c.sealedAt[big] != 2 || c.sealedAt[small] != 1 {
		t.Errorf("cell reads of the step past the bound %d (want 2: counted at each view), of a small one %d (want 1: kept)", c.sealedAt[big], c.sealedAt[small])
	}
}
