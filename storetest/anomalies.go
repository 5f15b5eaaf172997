package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// AnomalyStore is what RunAnomalies needs of a backend: a store and its
// anomaly triage.
type AnomalyStore interface {
	toolplane.Store
	toolplane.AnomalyStore
}

// The anomaly triage contract, beyond toolplane.AnomalyStore's comments:
//
//   - TallyAudit counts call events only (the empty Kind), in [from,
//     until), of every organization; a control-plane event is never a
//     call.
//   - A baseline's statistics are kept as float64 exactly; a window is
//     folded in once: a put of a window at or before the stored one
//     changes nothing.
//   - At most one open item per organization, agent, tool and signal,
//     however many concurrent filings; an acknowledged item no longer
//     holds the place, so the next filing is a new item.
//   - Items, baselines and their reads and writes are filtered by
//     organization.
var anomalyCases = []struct {
	name string
	run  func(t *testing.T, s AnomalyStore)
}{
	{"Tally", testAnomalyTally},
	{"Watermark", testAnomalyWatermark},
	{"Baselines", testAnomalyBaselines},
	{"FileOnce", testAnomalyFileOnce},
	{"ConcurrentFile", testAnomalyConcurrentFile},
	{"Acknowledge", testAnomalyAcknowledge},
	{"List", testAnomalyList},
	{"Isolation", testAnomalyIsolation},
	{"Count", testAnomalyCount},
}

// RunAnomalies runs the anomaly triage checks as subtests of t, named
// Anomalies/Check, each on a store newStore answers.
func RunAnomalies(t *testing.T, newStore func(t *testing.T) AnomalyStore) {
	t.Helper()
	t.Run("Anomalies", func(t *testing.T) {
		t.Parallel()
		for _, c := range anomalyCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

// callEvent answers a call's audit event of agent and tool with outcome
// and cost at created.
func callEvent(org, id, agent, tool, outcome string, cost int64, created time.Time) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{ID: id, OrganizationID: org, RunID: "run-" + id, AgentID: agent, Tool: tool,
		Source: toolplane.SourceREST, Outcome: outcome, CostCents: cost, CreatedAt: created}
}

func testAnomalyTally(t *testing.T, s AnomalyStore) {
	ctx, org := t.Context(), newOrg()
	from := at(time.Hour)
	until := from.Add(5 * time.Minute)
	events := []*toolplane.AuditEvent{
		callEvent(org, "e1", "agent-a", "payments.refund_order", "ok", 30, from),
		callEvent(org, "e2", "agent-a", "payments.refund_order", "ok", 12, from.Add(time.Minute)),
		callEvent(org, "e3", "agent-a", "payments.refund_order", "denied", 0, until.Add(-time.Microsecond)),
		callEvent(org, "e4", "agent-b", "payments.refund_order", "ok", 5, from.Add(2*time.Minute)),
		// Outside the range: before it, and at its end.
		callEvent(org, "e5", "agent-a", "payments.refund_order", "ok", 1000, from.Add(-time.Microsecond)),
		callEvent(org, "e6", "agent-a", "payments.refund_order", "ok", 1000, until),
	}
	// A control-plane event in the range is not a call.
	cp := callEvent(org, "e7", "agent-a", "payments.refund_order", "approved", 0, from)
	cp.Kind = toolplane.AuditApproval
	events = append(events, cp)
	for _, e := range events {
		appendAudit(t, s, e)
	}
	got, err := s.TallyAudit(ctx, from, until)
	if err != nil {
		t.Fatal(err)
	}
	var mine []toolplane.AuditTally
	for _, g := range got {
		if g.OrganizationID == org {
			mine = append(mine, g)
		}
	}
	slices.SortFunc(mine, func(a, b toolplane.AuditTally) int {
		return cmpStrings(a.AgentID+"/"+a.Outcome, b.AgentID+"/"+b.Outcome)
	})
	want := []toolplane.AuditTally{
		{OrganizationID: org, AgentID: "agent-a", Tool: "payments.refund_order", Outcome: "denied", Calls: 1, CostCents: 0},
		{OrganizationID: org, AgentID: "agent-a", Tool: "payments.refund_order", Outcome: "ok", Calls: 2, CostCents: 42},
		{OrganizationID: org, AgentID: "agent-b", Tool: "payments.refund_order", Outcome: "ok", Calls: 1, CostCents: 5},
	}
	if !slices.Equal(mine, want) {
		t.Fatalf("TallyAudit = %+v\nwant %+v", mine, want)
	}
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testAnomalyWatermark(t *testing.T, s AnomalyStore) {
	ctx := t.Context()
	// The watermark is the deployment's: a backend whose stores share a
	// database starts from whatever is stored.
	start, err := s.AnomalyWatermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := stored(start.Add(5 * time.Minute))
	if start.IsZero() {
		next = stored(at(0))
	}
	if ok, err := s.AdvanceAnomalyWatermark(ctx, start, next); !ok || err != nil {
		t.Fatalf("AdvanceAnomalyWatermark(%v → %v) = %v, %v", start, next, ok, err)
	}
	// A second advance from the same point loses: another node did it.
	if ok, err := s.AdvanceAnomalyWatermark(ctx, start, next.Add(time.Minute)); ok || err != nil {
		t.Fatalf("a stale AdvanceAnomalyWatermark = %v, %v; want false, nil", ok, err)
	}
	got, err := s.AnomalyWatermark(ctx)
	if err != nil || !got.Equal(next) || got.Location() != time.UTC {
		t.Fatalf("AnomalyWatermark = %v, %v; want %v in UTC", got, err, next)
	}
}

func newBaseline(org, agent, tool string, bucket time.Time) *toolplane.AnomalyBaseline {
	b := &toolplane.AnomalyBaseline{OrganizationID: org, AgentID: agent, Tool: tool, Bucket: bucket, Buckets: 12,
		LastActive: bucket.Add(-5 * time.Minute),
		Stats: [4]toolplane.AnomalyStat{{Mean: 10.25, Variance: 1.0 / 3}, {Mean: 0.1, Variance: 0.09}, {Mean: 0, Variance: 0},
			{Mean: 1234.5678, Variance: 98765.4321}}}
	// Two hours of the time-of-day profile hold windows; the rest none.
	b.Hours[9] = toolplane.AnomalyHour{Windows: 36, Stats: [4]toolplane.AnomalyStat{{Mean: 60.0 / 7, Variance: 0.1 + 0.2}}}
	b.Hours[23] = toolplane.AnomalyHour{Windows: 1, Stats: [4]toolplane.AnomalyStat{{Mean: 1e-9}, {}, {}, {Mean: 5e12, Variance: 1e300}}}
	return b
}

func wantBaselines(t *testing.T, s AnomalyStore, org string, want ...*toolplane.AnomalyBaseline) {
	t.Helper()
	got, err := s.ListAnomalyBaselines(t.Context(), org)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListAnomalyBaselines = %d baselines, want %d", len(got), len(want))
	}
	for i := range want {
		if d := diff(got[i], *want[i]); d != "" {
			t.Fatalf("ListAnomalyBaselines[%d]: %s", i, d)
		}
	}
}

func testAnomalyBaselines(t *testing.T, s AnomalyStore) {
	ctx, org := t.Context(), newOrg()
	b := newBaseline(org, "agent-b", "payments.refund_order", at(time.Hour))
	a := newBaseline(org, "agent-a", "payments.refund_order", at(time.Hour))
	for _, x := range []*toolplane.AnomalyBaseline{b, a} {
		if ok, err := s.PutAnomalyBaseline(ctx, x); !ok || err != nil {
			t.Fatalf("PutAnomalyBaseline(%s) = %v, %v", x.AgentID, ok, err)
		}
	}
	wantBaselines(t, s, org, a, b)

	// The same window again, or an earlier one, changes nothing.
	for _, d := range []time.Duration{0, -5 * time.Minute} {
		again := newBaseline(org, "agent-a", "payments.refund_order", at(time.Hour+d))
		again.Stats[0].Mean = 99
		if ok, err := s.PutAnomalyBaseline(ctx, again); ok || err != nil {
			t.Fatalf("PutAnomalyBaseline of a window folded in = %v, %v; want false, nil", ok, err)
		}
	}
	wantBaselines(t, s, org, a, b)

	later := newBaseline(org, "agent-a", "payments.refund_order", at(time.Hour+5*time.Minute))
	later.Buckets, later.Stats[0] = 13, toolplane.AnomalyStat{Mean: 11, Variance: 2}
	if ok, err := s.PutAnomalyBaseline(ctx, later); !ok || err != nil {
		t.Fatalf("PutAnomalyBaseline of the next window = %v, %v", ok, err)
	}
	wantBaselines(t, s, org, later, b)

	// Retention removes the idle ones, up to the limit.
	n, err := s.DeleteAnomalyBaselines(ctx, b.LastActive.Add(time.Microsecond), 1)
	if err != nil || n != 1 {
		t.Fatalf("DeleteAnomalyBaselines = %d, %v; want 1", n, err)
	}
	wantBaselines(t, s, org, later)
	if _, err := s.DeleteAnomalyBaselines(ctx, at(0), 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Fatalf("DeleteAnomalyBaselines(limit 0) = %v, want ErrInvalid", err)
	}
}

func newAnomaly(org, id, agent string, signal toolplane.AnomalySignal, window time.Time) *toolplane.Anomaly {
	return &toolplane.Anomaly{ID: id, OrganizationID: org, AgentID: agent, Tool: "payments.refund_order", Signal: signal,
		Observed: 30, Mean: 0.25, StdDev: 0.5, Score: 59.5, WindowStart: window, WindowEnd: window.Add(5 * time.Minute),
		Windows: 1, Status: toolplane.AnomalyOpen, CreatedAt: window.Add(6 * time.Minute), UpdatedAt: window.Add(6 * time.Minute)}
}

func wantAnomaly(t *testing.T, s AnomalyStore, want *toolplane.Anomaly) {
	t.Helper()
	got, err := s.GetAnomaly(t.Context(), want.OrganizationID, want.ID)
	if err != nil {
		t.Fatalf("GetAnomaly(%s) = %v", want.ID, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Fatalf("GetAnomaly(%s): %s", want.ID, d)
	}
}

func fileAnomaly(t *testing.T, s AnomalyStore, a *toolplane.Anomaly) (*toolplane.Anomaly, bool) {
	t.Helper()
	got, isNew, err := s.FileAnomaly(t.Context(), a)
	if err != nil {
		t.Fatalf("FileAnomaly(%s) = %v", a.ID, err)
	}
	return got, isNew
}

func testAnomalyFileOnce(t *testing.T, s AnomalyStore) {
	org := newOrg()
	first := newAnomaly(org, "ano-1", "agent-a", toolplane.SignalDenialRate, at(time.Hour))
	got, isNew := fileAnomaly(t, s, first)
	if !isNew || diff(*got, *first) != "" {
		t.Fatalf("FileAnomaly of a new item = %+v, %v; want it stored: %s", got, isNew, diff(*got, *first))
	}
	wantAnomaly(t, s, first)

	// The next window of the same deviation updates the open item.
	cont := newAnomaly(org, "ano-2", "agent-a", toolplane.SignalDenialRate, at(time.Hour+5*time.Minute))
	cont.Observed, cont.Score = 45, 89.5
	got, isNew = fileAnomaly(t, s, cont)
	want := *first
	want.Observed, want.Score, want.WindowStart, want.WindowEnd, want.UpdatedAt, want.Windows =
		45, 89.5, cont.WindowStart, cont.WindowEnd, cont.UpdatedAt, 2
	if isNew || diff(*got, want) != "" {
		t.Fatalf("FileAnomaly of a continuing deviation = new %v: %s", isNew, diff(*got, want))
	}
	wantAnomaly(t, s, &want)
	if _, err := s.GetAnomaly(t.Context(), org, cont.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetAnomaly of the folded filing = %v, want ErrNotFound", err)
	}
	// The same window filed again (a retried run) does not count twice.
	again := *cont
	again.ID = "ano-3"
	if got, _ = fileAnomaly(t, s, &again); got.Windows != 2 {
		t.Fatalf("a window filed twice counts %d windows, want 2", got.Windows)
	}

	// Another signal, or another agent, is an item of its own.
	for i, other := range []*toolplane.Anomaly{
		newAnomaly(org, "ano-4", "agent-a", toolplane.SignalCallRate, at(time.Hour)),
		newAnomaly(org, "ano-5", "agent-b", toolplane.SignalDenialRate, at(time.Hour)),
	} {
		if _, isNew := fileAnomaly(t, s, other); !isNew {
			t.Fatalf("filing %d was folded into another item", i)
		}
	}
	// An ID taken is refused.
	dup := newAnomaly(org, "ano-1", "agent-c", toolplane.SignalSpend, at(time.Hour))
	if _, _, err := s.FileAnomaly(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("FileAnomaly with an ID taken = %v, want ErrExists", err)
	}
}

func testAnomalyConcurrentFile(t *testing.T, s AnomalyStore) {
	org := newOrg()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[string]int{}
	)
	for i := range writers {
		wg.Go(func() {
			a := newAnomaly(org, fmt.Sprintf("ano-%02d", i), "agent-a", toolplane.SignalDenialRate, at(time.Duration(i)*time.Minute))
			got, _, err := s.FileAnomaly(t.Context(), a)
			if err != nil {
				t.Errorf("FileAnomaly(writer %d) = %v", i, err)
				return
			}
			mu.Lock()
			ids[got.ID]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != 1 {
		t.Fatalf("%d concurrent filings of one deviation made %d items, want 1", writers, len(ids))
	}
	rows, _, err := s.ListAnomalies(t.Context(), org, toolplane.AnomalyOpen, "", maxLimit)
	if err != nil || len(rows) != 1 || rows[0].Windows != writers {
		t.Fatalf("ListAnomalies = %+v, %v; want one item of %d windows", rows, err, writers)
	}
}

func testAnomalyAcknowledge(t *testing.T, s AnomalyStore) {
	ctx, org := t.Context(), newOrg()
	a := newAnomaly(org, "ano-1", "agent-a", toolplane.SignalDenialRate, at(time.Hour))
	fileAnomaly(t, s, a)
	when := at(2 * time.Hour)
	if ok, err := s.AcknowledgeAnomaly(ctx, org, a.ID, "ada@example.com", when); !ok || err != nil {
		t.Fatalf("AcknowledgeAnomaly = %v, %v", ok, err)
	}
	want := *a
	want.Status, want.AcknowledgedBy, want.AcknowledgedAt = toolplane.AnomalyAcknowledged, "ada@example.com", when
	wantAnomaly(t, s, &want)
	// Once is enough; the second answers false and keeps the first's.
	if ok, err := s.AcknowledgeAnomaly(ctx, org, a.ID, "bob@example.com", when.Add(time.Hour)); ok || err != nil {
		t.Fatalf("a second AcknowledgeAnomaly = %v, %v; want false, nil", ok, err)
	}
	wantAnomaly(t, s, &want)
	if ok, err := s.AcknowledgeAnomaly(ctx, org, "ano-none", "ada@example.com", when); ok || err != nil {
		t.Fatalf("AcknowledgeAnomaly of no item = %v, %v; want false, nil", ok, err)
	}
	// The same deviation after the acknowledgement is a new item.
	next := newAnomaly(org, "ano-2", "agent-a", toolplane.SignalDenialRate, at(3*time.Hour))
	if got, isNew := fileAnomaly(t, s, next); !isNew || got.ID != next.ID {
		t.Fatalf("a filing after acknowledgement answered %s (new %v), want a new item", got.ID, isNew)
	}
}

func testAnomalyList(t *testing.T, s AnomalyStore) {
	ctx, org := t.Context(), newOrg()
	const n = 7
	var all []toolplane.Anomaly
	for _, i := range shuffled(n) {
		a := newAnomaly(org, fmt.Sprintf("ano-%d", i), fmt.Sprintf("agent-%d", i), toolplane.SignalCallRate, at(time.Duration(i/2)*time.Minute))
		fileAnomaly(t, s, a)
		if i%3 == 0 {
			if ok, err := s.AcknowledgeAnomaly(ctx, org, a.ID, "ada@example.com", at(time.Hour)); !ok || err != nil {
				t.Fatalf("AcknowledgeAnomaly = %v, %v", ok, err)
			}
			a.Status, a.AcknowledgedBy, a.AcknowledgedAt = toolplane.AnomalyAcknowledged, "ada@example.com", at(time.Hour)
		}
		all = append(all, *a)
	}
	slices.SortFunc(all, func(a, b toolplane.Anomaly) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmpStrings(b.ID, a.ID)
	})
	for _, status := range []toolplane.AnomalyStatus{"", toolplane.AnomalyOpen, toolplane.AnomalyAcknowledged} {
		var want []toolplane.Anomaly
		for _, a := range all {
			if status == "" || a.Status == status {
				want = append(want, a)
			}
		}
		got := pageAll(t, "ListAnomalies", 2, nil, func(after string) ([]toolplane.Anomaly, string, error) {
			return s.ListAnomalies(ctx, org, status, after, 2)
		})
		if len(got) != len(want) {
			t.Fatalf("ListAnomalies(%q) = %d items, want %d", status, len(got), len(want))
		}
		for i := range want {
			if d := diff(got[i], want[i]); d != "" {
				t.Fatalf("ListAnomalies(%q)[%d]: %s", status, i, d)
			}
		}
	}
	if _, _, err := s.ListAnomalies(ctx, org, "", "not-a-cursor", 2); !errors.Is(err, toolplane.ErrBadCursor) {
		t.Fatalf("ListAnomalies(bad cursor) = %v, want ErrBadCursor", err)
	}
	if _, _, err := s.ListAnomalies(ctx, org, "", "", 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Fatalf("ListAnomalies(limit 0) = %v, want ErrInvalid", err)
	}
}

func testAnomalyIsolation(t *testing.T, s AnomalyStore) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := newAnomaly(orgA, "ano-1", "agent-a", toolplane.SignalDenialRate, at(time.Hour))
	fileAnomaly(t, s, a)
	ba := newBaseline(orgA, "agent-a", "payments.refund_order", at(time.Hour))
	if _, err := s.PutAnomalyBaseline(ctx, ba); err != nil {
		t.Fatal(err)
	}

	if got, err := s.GetAnomaly(ctx, orgB, a.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetAnomaly as B = %+v, %v; want ErrNotFound", got, err)
	}
	for _, status := range []toolplane.AnomalyStatus{"", toolplane.AnomalyOpen} {
		if rows, next, err := s.ListAnomalies(ctx, orgB, status, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
			t.Errorf("ListAnomalies(%q) as B = %d rows, %q, %v; want none", status, len(rows), next, err)
		}
	}
	if ok, err := s.AcknowledgeAnomaly(ctx, orgB, a.ID, "intruder", at(2*time.Hour)); ok || err != nil {
		t.Errorf("AcknowledgeAnomaly as B = %v, %v; want false, nil", ok, err)
	}
	if rows, err := s.ListAnomalyBaselines(ctx, orgB); err != nil || len(rows) != 0 {
		t.Errorf("ListAnomalyBaselines as B = %d rows, %v; want none", len(rows), err)
	}
	wantAnomaly(t, s, a)

	// B's deviation of the same agent, tool and signal is B's own item,
	// not folded into A's; B's baseline of the same agent and tool too.
	b := newAnomaly(orgB, a.ID, a.AgentID, a.Signal, a.WindowStart.Add(5*time.Minute))
	if got, isNew := fileAnomaly(t, s, b); !isNew || got.OrganizationID != orgB {
		t.Fatalf("FileAnomaly as B answered %+v (new %v), want B's own item", got, isNew)
	}
	wantAnomaly(t, s, a)
	wantAnomaly(t, s, b)
	bb := newBaseline(orgB, "agent-a", "payments.refund_order", at(time.Hour))
	bb.Stats[0].Mean = 1
	if ok, err := s.PutAnomalyBaseline(ctx, bb); !ok || err != nil {
		t.Fatalf("PutAnomalyBaseline as B = %v, %v", ok, err)
	}
	wantBaselines(t, s, orgA, ba)
	wantBaselines(t, s, orgB, bb)
}
