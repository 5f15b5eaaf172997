package runs_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/runs"
)

// benchEvents is how many audit events the benchmark's organization holds:
// a million, the trail the run page is held to (p50 at most 50 ms).
// $TOOLPLANE_BENCH_EVENTS sets another count, to try it quicker.
func benchEvents(b *testing.B) int {
	if v := os.Getenv("TOOLPLANE_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("TOOLPLANE_BENCH_EVENTS=%q: a count of at least 1000", v)
		}
		return n
	}
	return 1_000_000
}

// batcher is a store that appends many events in one commit (both do).
type batcher interface {
	AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
}

// BenchmarkGet measures the server time of reading one run (Service.Get:
// its events, its approval, the run tree's spend) from an organization
// whose trail holds a million audit events, interleaved across 50,000
// runs of 20 calls each, every call carrying a policy decision; the run
// read has an approval a person decided. It runs on a SQLite file, and on
// PostgreSQL when the test server is set, and reports the median and the
// 99th percentile besides the mean.
func BenchmarkGet(b *testing.B) {
	for name, open := range stores(b) {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			total := benchEvents(b)
			runsOf := total / 20
			start := time.Now().Add(-24 * time.Hour)
			outcomes := []string{"ok", "ok", "ok", "denied", "ok", "invalid_input", "ok", "timeout"}
			batch := make([]*toolplane.AuditEvent, 0, 1000)
			for i := range total {
				run := i % runsOf
				e := &toolplane.AuditEvent{ID: fmt.Sprintf("aud_%07d", i), OrganizationID: "org-a", RunID: fmt.Sprintf("run-%05d", run),
					StepPath: "agent", AgentID: "agent-billing", Tool: "shop.lookup", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
					Outcome: outcomes[i%len(outcomes)], ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", LatencyMicros: 900, CostCents: int64(i % 5),
					PolicyDecision: "allow", CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
				if run == 7 && i/runsOf == 3 {
					e.Tool, e.Outcome, e.ApprovalID, e.PolicyDecision, e.PolicyRule = "shop.refund", "approval_required", "apr_bench", "require_approval", "refunds"
				}
				batch = append(batch, e)
				if len(batch) == cap(batch) || i == total-1 {
					if err := s.(batcher).AppendAuditBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := s.InsertApproval(ctx, &toolplane.Approval{ID: "apr_bench", OrganizationID: "org-a", RunID: "run-00007", Tool: "shop.refund",
				Key: "k", ArgumentsHash: "sha256:00", Arguments: []byte(`{}`), Status: toolplane.ApprovalApproved, DefaultOnTimeout: "deny",
				Invocation: []byte(`{"RunID":"run-00007","Ceilings":{"MaxCostCents":500}}`), CreatedAt: start, ExpiresAt: start.Add(time.Hour),
				ResolvedAt: start.Add(time.Minute), ResolvedBy: "bob"}); err != nil {
				b.Fatal(err)
			}
			svc := runs.New(s)
			by := person("org-a", "grace", toolplane.RoleAuditor)
			var took []time.Duration
			for b.Loop() {
				t0 := time.Now()
				r, err := svc.Get(ctx, "run-00007", by)
				took = append(took, time.Since(t0))
				if err != nil || len(r.Calls) != 20 || len(r.Approvals) != 1 || !r.Spend.CeilingKnown {
					b.Fatalf("%v: %d calls, %d approvals", err, len(r.Calls), len(r.Approvals))
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
