package postgres

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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
	cpu0, srv0 := processCPU(b), serverCPU()
	for b.Loop() {
		r, err := auditchain.VerifyStore(b.Context(), s, &auditchain.KeySet{}, "org-bench", 0, 0)
		if err != nil || !r.OK || r.Events != n {
			b.Fatalf("verify = %+v, %v", r, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(n*b.N), "cpu-ns/event")
	b.ReportMetric(float64((serverCPU()-srv0).Nanoseconds())/float64(n*b.N), "server-cpu-ns/event")
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

// serverCPU answers the CPU time, user and system, of the PostgreSQL
// processes on this machine (0 where there are none): a benchmark's
// connections' backends, and whatever else the server did meanwhile.
func serverCPU() time.Duration {
	dirs, _ := os.ReadDir("/proc")
	var ticks int64
	for _, d := range dirs {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 14 and 15.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || !bytes.HasSuffix(stat[:i], []byte("(postgres")) {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
}
