package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// Benchmark runs the hot-path store benchmarks every backend reports in
// BENCHMARKS.md, each on a fresh store from newStore: one write call's
// journal traffic, the journal read, the audit append, and a filtered page
// of the audit trail (a query built from the filter's set fields).
func Benchmark(b *testing.B, newStore func(b *testing.B) toolplane.Store) {
	for _, bm := range []struct {
		name string
		run  func(*testing.B, toolplane.Store)
	}{
		{"ClaimLifecycle", benchClaimLifecycle},
		{"GetClaim", benchGetClaim},
		{"AppendAudit", benchAppendAudit},
		{"ListAudit", benchListAudit},
		{"InsertUsage", benchInsertUsage},
		{"DaySpend", benchDaySpend},
	} {
		b.Run(bm.name, func(b *testing.B) { bm.run(b, newStore(b)) })
	}
}

// benchClaim is a claim as the journal writes it when a write call starts.
func benchClaim(key string, now time.Time) *toolplane.Claim {
	return &toolplane.Claim{
		OrganizationID: "org-bench",
		Tool:           "payments.refund_order",
		Key:            key,
		RequestHash:    "sha256:4f2a9c0e7b1d3e5f6a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f",
		Status:         toolplane.ClaimProcessing,
		Owner:          "node-1/worker-3",
		LeaseUntil:     now.Add(30 * time.Second),
		RunID:          "run-01JQ8Z6W3X",
		StepPath:       "agent",
		Arguments:      []byte(`{"order_id":"ord_8d1c","amount_cents":1250,"reason":"damaged"}`),
		Version:        1,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
}

// benchClaimLifecycle is one write call's journal traffic: claim the
// key, mark it dispatched before the handler runs, complete it with the
// result. Three committed writes per iteration.
func benchClaimLifecycle(b *testing.B, s toolplane.Store) {
	ctx := context.Background()
	now := time.Now()
	result := []byte(`{"ok":true,"refund_id":"re_3Nf0","amount_cents":1250}`)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := benchClaim(strconv.Itoa(i), now)
		i++
		if ok, err := s.InsertClaim(ctx, c); err != nil || !ok {
			b.Fatalf("InsertClaim = %v, %v", ok, err)
		}
		c.Dispatched, c.Attempts = true, 1
		if ok, err := s.UpdateClaim(ctx, c); err != nil || !ok {
			b.Fatalf("UpdateClaim(dispatched) = %v, %v", ok, err)
		}
		c.Status, c.Result, c.Owner, c.LeaseUntil = toolplane.ClaimCompleted, result, "", time.Time{}
		if ok, err := s.UpdateClaim(ctx, c); err != nil || !ok {
			b.Fatalf("UpdateClaim(completed) = %v, %v", ok, err)
		}
	}
}

// benchGetClaim is the journal read every write call makes first.
func benchGetClaim(b *testing.B, s toolplane.Store) {
	ctx := context.Background()
	now := time.Now()
	for i := range 1000 {
		if _, err := s.InsertClaim(ctx, benchClaim(strconv.Itoa(i), now)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetClaim(ctx, "org-bench", "payments.refund_order", "500"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchAppendAudit is the audit row every call ends with.
func benchAppendAudit(b *testing.B, s toolplane.Store) {
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := &toolplane.AuditEvent{
			ID:             "ev-" + strconv.Itoa(i),
			OrganizationID: "org-bench",
			RunID:          "run-01JQ8Z6W3X",
			AgentID:        "agent-billing",
			PrincipalID:    "principal-7",
			Tool:           "payments.refund_order",
			ToolVersion:    "2.1.0",
			Source:         toolplane.SourceMCP,
			Outcome:        "ok",
			ArgumentsHash:  "sha256:4f2a9c0e7b1d3e5f",
			LatencyMicros:  1234,
			CreatedAt:      now.Add(time.Duration(i) * time.Microsecond),
		}
		i++
		if err := s.AppendAudit(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

// benchListAudit is one filtered page of the audit trail after a cursor:
// the query built from the filter's set fields, the cursor condition and
// the page one row longer than asked.
func benchListAudit(b *testing.B, s toolplane.Store) {
	ctx := context.Background()
	now := time.Now()
	for i := range 200 {
		e := &toolplane.AuditEvent{
			ID: "ev-" + strconv.Itoa(i), OrganizationID: "org-bench", RunID: "run-01JQ8Z6W3X", AgentID: "agent-billing",
			PrincipalID: "principal-7", Tool: "payments.refund_order", ToolVersion: "2.1.0", Source: toolplane.SourceMCP,
			Outcome: []string{"ok", "denied"}[i%2], CreatedAt: now.Add(time.Duration(i) * time.Microsecond),
		}
		if err := s.AppendAudit(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	f := toolplane.AuditFilter{AgentID: "agent-billing", Tool: "payments.refund_order", Outcomes: []string{"ok", "denied"}, Since: now}
	_, after, err := s.ListAudit(ctx, "org-bench", f, "", 20)
	if err != nil || after == "" {
		b.Fatalf("ListAudit = %q, %v; want a next page", after, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if evs, _, err := s.ListAudit(ctx, "org-bench", f, after, 20); err != nil || len(evs) != 20 {
			b.Fatalf("ListAudit = %d events, %v", len(evs), err)
		}
	}
}

// benchInsertUsage is a metered call's usage row, written with the
// accrual of its organization's day in one transaction: every row of the
// loop lands on the same day's counter, a busy organization's case.
func benchInsertUsage(b *testing.B, s toolplane.Store) {
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		u := &toolplane.Usage{ID: "use-" + strconv.Itoa(i), OrganizationID: "org-bench", RunID: "run-01JQ8Z6W3X",
			RootRunID: "run-01JQ8Z6W3X", AgentID: "agent-research", Tool: "research.search", CostCents: 3, Units: 1, CreatedAt: now}
		i++
		if err := s.InsertUsage(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDaySpend is the daily ceiling's check before a metered call: one
// read of the day's counter and the ceiling.
func benchDaySpend(b *testing.B, s toolplane.Store) {
	ctx := context.Background()
	now := time.Now()
	for i := range 100 {
		u := &toolplane.Usage{ID: "use-" + strconv.Itoa(i), OrganizationID: "org-bench", RunID: "r", RootRunID: "r",
			Tool: "research.search", CostCents: 3, Units: 1, CreatedAt: now}
		if err := s.InsertUsage(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
	day := toolplane.SpendDay(now)
	b.ReportAllocs()
	for b.Loop() {
		if d, err := s.DaySpend(ctx, "org-bench", day); err != nil || d.SpentCents != 300 {
			b.Fatal(d, err)
		}
	}
}
