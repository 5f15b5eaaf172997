package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
)

// BenchmarkRunPage measures the server time of an auditor's run page (the
// session read, the run read through the runs service, the page rendered)
// in an organization whose trail holds a million audit events, interleaved
// across 50,000 runs of 20 calls each, on the embedded store (a SQLite
// file) and on PostgreSQL when the test server is set. The run shown has
// an approval a person decided. $TOOLPLANE_BENCH_EVENTS sets another
// count of events, to try it quicker. It reports the median and the 99th
// percentile besides the mean.
func BenchmarkRunPage(b *testing.B) {
	total := 1_000_000
	if v := os.Getenv("TOOLPLANE_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("TOOLPLANE_BENCH_EVENTS=%q: a count of at least 1000", v)
		}
		total = n
	}
	for _, backend := range backends() {
		b.Run(backend, func(b *testing.B) { benchRunPage(b, newWorldOn(b, backend), total) })
	}
}

func benchRunPage(b *testing.B, w *world, total int) {
	ctx := context.Background()
	runsOf := total / 20
	start := time.Now().Add(-24 * time.Hour)
	outcomes := []string{"ok", "ok", "ok", "denied", "ok", "invalid_input", "ok", "timeout"}
	batch := make([]*toolplane.AuditEvent, 0, 1000)
	for i := range total {
		run := i % runsOf
		e := &toolplane.AuditEvent{ID: fmt.Sprintf("aud_bench_%07d", i), OrganizationID: org, RunID: fmt.Sprintf("run-%05d", run),
			StepPath: "agent", AgentID: "agent-billing", Tool: "xss.meter", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
			Outcome: outcomes[i%len(outcomes)], ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", LatencyMicros: 900, CostCents: int64(i % 5),
			PolicyDecision: "allow", CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
		if run == 7 && i/runsOf == 3 {
			e.Tool, e.Outcome, e.ApprovalID, e.PolicyDecision = "xss.pay", "approval_required", "apr_bench", "require_approval"
		}
		batch = append(batch, e)
		if len(batch) == cap(batch) || i == total-1 {
			if err := w.store.(audit.Batcher).AppendAuditBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.store.InsertApproval(ctx, &toolplane.Approval{ID: "apr_bench", OrganizationID: org, RunID: "run-00007", Tool: "xss.pay",
		ToolVersion: "1.2.0", Key: "k", ArgumentsHash: "sha256:00", Arguments: []byte(`{}`), Status: toolplane.ApprovalApproved, DefaultOnTimeout: "deny",
		Invocation: []byte(`{"RunID":"run-00007","Ceilings":{"MaxCostCents":500}}`), CreatedAt: start, ExpiresAt: start.Add(time.Hour),
		ResolvedAt: start.Add(time.Minute), ResolvedBy: "fin"}); err != nil {
		b.Fatal(err)
	}
	browser := w.browser()
	browser.signIn("grace")
	u, _ := url.Parse(w.base)
	cookies := browser.hc.Jar.Cookies(u)
	var took []time.Duration
	for b.Loop() {
		req := httptest.NewRequest("GET", "/console/runs/run-00007", nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		t0 := time.Now()
		w.handler.ServeHTTP(rec, req)
		took = append(took, time.Since(t0))
		if entries := strings.Count(rec.Body.String(), `<li class="entry`); rec.Code != http.StatusOK || entries != 20 {
			b.Fatalf("run page: %d, %d entries", rec.Code, entries)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}
