package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TrafficStore is what RunTraffic needs of a backend: a store and its
// traffic reads.
type TrafficStore interface {
	toolplane.Store
	toolplane.TrafficStore
}

// The traffic contract, beyond toolplane.TrafficStore's comments:
//
//   - Only call events (the empty Kind) of toolplane.TrafficSources count:
//     a control-plane event, a sweep's or a late settlement's never does.
//   - From is included and Until is not; a latency falls in the bucket
//     toolplane.TrafficLatencyBucket names.
//   - Every read is filtered by organization: another organization's
//     calls, in the same range and of the same tool, are never counted.
var trafficCases = []struct {
	name string
	run  func(t *testing.T, s TrafficStore)
}{
	{"Cells", testTrafficCells},
	{"Series", testTrafficSeries},
	{"Tool", testTrafficTool},
	{"Isolation", testTrafficIsolation},
}

// RunTraffic runs the traffic checks as subtests of t, named
// Traffic/Check, each on a store newStore answers.
func RunTraffic(t *testing.T, newStore func(t *testing.T) TrafficStore) {
	t.Helper()
	t.Run("Traffic", func(t *testing.T) {
		t.Parallel()
		for _, c := range trafficCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

// trafficEvents stores a mix of calls of org around base, and answers
// them: calls of two tools by two agents with every kind of ending and
// latencies across the buckets, inside and on both edges of the hour
// from base, and events that are not calls (a control-plane change, a
// sweep's state, a late settlement) in the same range.
func trafficEvents(t *testing.T, s TrafficStore, org string) []toolplane.AuditEvent {
	t.Helper()
	var evs []toolplane.AuditEvent
	outcomes := []string{"ok", "ok", "ok", "denied", "timeout", "internal_error", "approval_required", "invalid_input"}
	latencies := []int64{0, 99, 100, 2_499, 2_500, 40_000, 999_999, 61_000_000}
	sources := []toolplane.Source{toolplane.SourceREST, toolplane.SourceMCP, toolplane.SourceSDK, toolplane.SourceResume, toolplane.SourceWorker}
	for i := range 40 {
		e := toolplane.AuditEvent{ID: fmt.Sprintf("aud-%s-%d", org, i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i),
			AgentID: []string{"agent-a", "agent-b"}[i%2], Tool: []string{"pay.refund", "crm.lookup"}[i/2%2],
			Source: sources[i%len(sources)], Outcome: outcomes[i%len(outcomes)], LatencyMicros: latencies[i/3%len(latencies)],
			CostCents: int64(i % 7), CreatedAt: at(time.Duration(i) * 90 * time.Second)}
		evs = append(evs, e)
	}
	// On the edges: one at From (counted), one at Until and one just
	// before From (not).
	evs = append(evs,
		toolplane.AuditEvent{ID: "aud-edge-from-" + org, OrganizationID: org, AgentID: "agent-a", Tool: "pay.refund",
			Source: toolplane.SourceREST, Outcome: "ok", LatencyMicros: 7, CostCents: 100, CreatedAt: at(0)},
		toolplane.AuditEvent{ID: "aud-edge-until-" + org, OrganizationID: org, AgentID: "agent-a", Tool: "pay.refund",
			Source: toolplane.SourceREST, Outcome: "ok", LatencyMicros: 7, CostCents: 100, CreatedAt: at(time.Hour)},
		toolplane.AuditEvent{ID: "aud-edge-before-" + org, OrganizationID: org, AgentID: "agent-a", Tool: "pay.refund",
			Source: toolplane.SourceREST, Outcome: "ok", LatencyMicros: 7, CostCents: 100, CreatedAt: at(-time.Microsecond)},
	)
	// Not calls: never counted.
	evs = append(evs,
		toolplane.AuditEvent{ID: "aud-control-" + org, OrganizationID: org, Kind: toolplane.AuditKey, Subject: "key_1", Tool: "pay.refund",
			Source: toolplane.SourceControl, Outcome: "created", CreatedAt: at(time.Minute)},
		toolplane.AuditEvent{ID: "aud-sweep-" + org, OrganizationID: org, AgentID: "agent-a", Tool: "pay.refund",
			Source: toolplane.SourceSweep, Outcome: "uncertain", CreatedAt: at(2 * time.Minute)},
		toolplane.AuditEvent{ID: "aud-settled-" + org, OrganizationID: org, Kind: toolplane.AuditReconciliation, AgentID: "agent-a", Tool: "pay.refund",
			Source: toolplane.SourceSettlement, Outcome: "ok", CostCents: 500, CreatedAt: at(3 * time.Minute)},
	)
	for i := range evs {
		if err := s.AppendAudit(t.Context(), &evs[i]); err != nil {
			t.Fatalf("AppendAudit(%s): %v", evs[i].ID, err)
		}
	}
	return evs
}

// counted reports whether e is one of q's calls, by the contract.
func counted(q toolplane.TrafficQuery, e toolplane.AuditEvent) bool {
	return e.OrganizationID == q.OrganizationID && e.Kind == toolplane.AuditCall &&
		slices.Contains(toolplane.TrafficSources, e.Source) &&
		!e.CreatedAt.Before(q.From) && e.CreatedAt.Before(q.Until) && (q.Tool == "" || e.Tool == q.Tool)
}

// wantCells answers what TrafficCells must answer of evs, sorted.
func wantCells(q toolplane.TrafficQuery, evs []toolplane.AuditEvent) []toolplane.TrafficCell {
	type key struct {
		tool, agent, outcome string
		bucket               int
	}
	m := map[key]*toolplane.TrafficCell{}
	for _, e := range evs {
		if !counted(q, e) {
			continue
		}
		k := key{e.Tool, e.AgentID, e.Outcome, toolplane.TrafficLatencyBucket(e.LatencyMicros)}
		c := m[k]
		if c == nil {
			c = &toolplane.TrafficCell{Tool: k.tool, AgentID: k.agent, Outcome: k.outcome, Latency: k.bucket}
			m[k] = c
		}
		c.Calls++
		c.CostCents += e.CostCents
	}
	out := make([]toolplane.TrafficCell, 0, len(m))
	for _, c := range m {
		out = append(out, *c)
	}
	return sortCells(out)
}

func sortCells(cs []toolplane.TrafficCell) []toolplane.TrafficCell {
	slices.SortFunc(cs, func(a, b toolplane.TrafficCell) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.AgentID, b.AgentID), cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Latency, b.Latency))
	})
	return cs
}

func sortPoints(ps []toolplane.TrafficPoint) []toolplane.TrafficPoint {
	slices.SortFunc(ps, func(a, b toolplane.TrafficPoint) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Outcome, b.Outcome))
	})
	return ps
}

func cells(t *testing.T, s TrafficStore, q toolplane.TrafficQuery) []toolplane.TrafficCell {
	t.Helper()
	got, err := s.TrafficCells(t.Context(), q)
	if err != nil {
		t.Fatalf("TrafficCells(%+v): %v", q, err)
	}
	return sortCells(got)
}

func testTrafficCells(t *testing.T, s TrafficStore) {
	org := newOrg()
	evs := trafficEvents(t, s, org)
	q := toolplane.TrafficQuery{OrganizationID: org, From: at(0), Until: at(time.Hour), Step: time.Minute}
	got, want := cells(t, s, q), wantCells(q, evs)
	if !slices.Equal(got, want) {
		t.Fatalf("TrafficCells =\n%+v\nwant\n%+v", got, want)
	}
	// The reference above is the contract restated; hold the store to a
	// few of its figures directly too.
	var calls, cost int64
	buckets := map[int]bool{}
	for _, c := range got {
		calls += c.Calls
		cost += c.CostCents
		buckets[c.Latency] = true
	}
	// 40 events in 60 minutes at 90 s apart: those at 0 .. 58.5 min; the
	// edge at From: 41 calls; the one at Until, before From, and the
	// three that are not calls are left out.
	if calls != 41 {
		t.Errorf("calls = %d, want 41", calls)
	}
	var wantCost int64 = 100
	for i := range 40 {
		wantCost += int64(i % 7)
	}
	if cost != wantCost {
		t.Errorf("cost = %d, want %d", cost, wantCost)
	}
	if !buckets[0] || !buckets[1] || !buckets[len(toolplane.TrafficLatencyBounds)] {
		t.Errorf("latency buckets %v: want the first (0 and 99 µs), the second (100 µs) and the unbounded one", buckets)
	}
	// An empty range answers no cells, not an error.
	if got := cells(t, s, toolplane.TrafficQuery{OrganizationID: org, From: at(48 * time.Hour), Until: at(49 * time.Hour), Step: time.Minute}); len(got) != 0 {
		t.Errorf("TrafficCells of an empty range = %+v, want none", got)
	}
}

func testTrafficSeries(t *testing.T, s TrafficStore) {
	org := newOrg()
	evs := trafficEvents(t, s, org)
	for _, step := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour} {
		q := toolplane.TrafficQuery{OrganizationID: org, From: at(0), Until: at(time.Hour), Step: step}
		got, err := s.TrafficSeries(t.Context(), q)
		if err != nil {
			t.Fatalf("TrafficSeries(%s): %v", step, err)
		}
		type key struct {
			step    int
			outcome string
		}
		m := map[key]*toolplane.TrafficPoint{}
		for _, e := range evs {
			if !counted(q, e) {
				continue
			}
			// The store keeps microseconds: the step is counted from the
			// stored times.
			k := key{int(stored(e.CreatedAt).Sub(stored(q.From)) / step), e.Outcome}
			p := m[k]
			if p == nil {
				p = &toolplane.TrafficPoint{Step: k.step, Outcome: k.outcome}
				m[k] = p
			}
			p.Calls++
			p.CostCents += e.CostCents
		}
		var want []toolplane.TrafficPoint
		for _, p := range m {
			want = append(want, *p)
		}
		if got, want := sortPoints(got), sortPoints(want); !slices.Equal(got, want) {
			t.Errorf("TrafficSeries(%s) =\n%+v\nwant\n%+v", step, got, want)
		}
		for _, p := range got {
			if p.Step < 0 || time.Duration(p.Step)*step >= time.Hour {
				t.Errorf("TrafficSeries(%s): step %d outside the hour", step, p.Step)
			}
		}
	}
}

func testTrafficTool(t *testing.T, s TrafficStore) {
	org := newOrg()
	evs := trafficEvents(t, s, org)
	for _, tool := range []string{"pay.refund", "crm.lookup", "none.such", "bad\x00name"} {
		q := toolplane.TrafficQuery{OrganizationID: org, Tool: tool, From: at(0), Until: at(time.Hour), Step: time.Minute}
		got, want := cells(t, s, q), wantCells(q, evs)
		if !slices.Equal(got, want) {
			t.Errorf("TrafficCells(tool %q) =\n%+v\nwant\n%+v", tool, got, want)
		}
		for _, c := range got {
			if c.Tool != tool {
				t.Errorf("TrafficCells(tool %q) counted %q", tool, c.Tool)
			}
		}
		if tool == "pay.refund" && len(got) == 0 {
			t.Errorf("TrafficCells(tool %q) counted nothing", tool)
		}
		series, err := s.TrafficSeries(t.Context(), q)
		if err != nil {
			t.Fatalf("TrafficSeries(tool %q): %v", tool, err)
		}
		var n, m int64
		for _, p := range series {
			n += p.Calls
		}
		for _, c := range got {
			m += c.Calls
		}
		if n != m {
			t.Errorf("tool %q: the series counts %d calls, the cells %d", tool, n, m)
		}
	}
}

func testTrafficIsolation(t *testing.T, s TrafficStore) {
	mine, theirs := newOrg(), newOrg()
	evs := trafficEvents(t, s, mine)
	// The other organization's calls: the same tools, agents and times,
	// many more of them and dearer.
	for i := range 100 {
		e := toolplane.AuditEvent{ID: fmt.Sprintf("aud-theirs-%d", i), OrganizationID: theirs, AgentID: "agent-a", Tool: "pay.refund",
			Source: toolplane.SourceREST, Outcome: "internal_error", LatencyMicros: 5_000, CostCents: 1_000, CreatedAt: at(time.Duration(i) * 30 * time.Second)}
		if err := s.AppendAudit(t.Context(), &e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"", "pay.refund"} {
		q := toolplane.TrafficQuery{OrganizationID: mine, Tool: tool, From: at(0), Until: at(time.Hour), Step: time.Minute}
		if got, want := cells(t, s, q), wantCells(q, evs); !slices.Equal(got, want) {
			t.Errorf("TrafficCells(tool %q) counts another organization's calls:\n%+v\nwant\n%+v", tool, got, want)
		}
		series, err := s.TrafficSeries(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range series {
			if p.CostCents >= 1_000 {
				t.Errorf("TrafficSeries(tool %q) step %d costs %d: another organization's calls", tool, p.Step, p.CostCents)
			}
		}
	}
	q := toolplane.TrafficQuery{OrganizationID: theirs, From: at(0), Until: at(time.Hour), Step: time.Minute}
	got := cells(t, s, q)
	if len(got) != 1 || got[0].Calls != 100 || got[0].CostCents != 100_000 {
		t.Errorf("their TrafficCells = %+v, want their 100 calls alone", got)
	}
}
