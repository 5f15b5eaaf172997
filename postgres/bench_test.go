package postgres

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/storetest"
)

// BenchmarkStore runs the shared store benchmarks on a fresh schema of the
// PostgreSQL in TOOLPLANE_TEST_POSTGRES.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) toolplane.Store { return newTestStore(b) })
}

// BenchmarkVerifyStore is online verification on PostgreSQL: an
// organization's chain of 20,000 events read from the store and verified
// (auditchain.VerifyStore). events/s counts what it verified.
func BenchmarkVerifyStore(b *testing.B) {
	s := newTestStore(b)
	const n = 20_000
	now := time.Now()
	for i := 0; i < n; i += 500 {
		evs := make([]*toolplane.AuditEvent, 500)
		for j := range evs {
			evs[j] = &toolplane.AuditEvent{
				ID: "ev-" + strconv.Itoa(i+j), OrganizationID: "org-bench", RunID: "run-1", AgentID: "agent-billing",
				Tool: "payments.refund_order", ToolVersion: "2.1.0", Source: toolplane.SourceMCP, Outcome: "ok",
				ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", Arguments: []byte(`{"order_id":"ord_8d1c","amount_cents":1250}`),
				LatencyMicros: 234, CreatedAt: now.Add(time.Duration(i+j) * time.Microsecond),
			}
		}
		if err := s.AppendAuditBatch(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for b.Loop() {
		r, err := auditchain.VerifyStore(b.Context(), s, &auditchain.KeySet{}, "org-bench", 0, 0)
		if err != nil || !r.OK || r.Events != n {
			b.Fatalf("verify = %+v, %v", r, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(n*b.N), "cpu-ns/event")
}

// processCPU answers the CPU time, user and system, this process has used
// (the client's: the server's is its own processes').
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
