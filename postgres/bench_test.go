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
// organization's chain of 20,000 events (TOOLPLANE_BENCH_CHAIN sets
// another length) read from the store and verified
// (auditchain.VerifyStore). events/s counts what it verified; cpu-ns/event
// is this process's CPU, user and system, over the timed loop, and
// server-cpu-ns/event the CPU of the server's backends serving the
// store's connections (their /proc/<pid>/stat, so the server must run on
// this machine; the figure is left out when it cannot be read).
func BenchmarkVerifyStore(b *testing.B) {
	s := newTestStore(b)
	n := benchChain(b)
	now := time.Now()
	for i := 0; i < n; i += 500 {
		evs := make([]*toolplane.AuditEvent, min(500, n-i))
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
	// One walk first, so the pool holds the connections the timed ones
	// use, and their backends can be found.
	if r, err := auditchain.VerifyStore(b.Context(), s, &auditchain.KeySet{}, "org-bench", 0, 0); err != nil || !r.OK {
		b.Fatalf("verify = %+v, %v", r, err)
	}
	server0 := backendCPU(b, s)
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
	if server0 != nil {
		if d, ok := backendCPUSince(b, s, server0); ok {
			b.ReportMetric(float64(d.Nanoseconds())/float64(n*b.N), "server-cpu-ns/event")
		}
	}
}

// benchChain is the length of BenchmarkVerifyStore's chain:
// TOOLPLANE_BENCH_CHAIN, or 20,000.
func benchChain(b *testing.B) int {
	n := 20_000
	if v := os.Getenv("TOOLPLANE_BENCH_CHAIN"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("TOOLPLANE_BENCH_CHAIN=%q is not a length", v)
		}
	}
	return n
}

// backendCPU answers the CPU time each backend serving the pool's
// connections has used, by its pid, or nil when a backend's
// /proc/<pid>/stat cannot be read (a server on another machine).
func backendCPU(b *testing.B, s *Store) map[int]time.Duration {
	conns := s.pool.AcquireAllIdle(b.Context())
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	out := make(map[int]time.Duration, len(conns))
	for _, c := range conns {
		var pid int
		if err := c.QueryRow(b.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			b.Fatal(err)
		}
		cpu, ok := procCPU(pid)
		if !ok {
			return nil
		}
		out[pid] = cpu
	}
	return out
}

// backendCPUSince answers the CPU the pool's backends used since before
// (backendCPU's answer): a backend opened since counts whole.
func backendCPUSince(b *testing.B, s *Store, before map[int]time.Duration) (time.Duration, bool) {
	now := backendCPU(b, s)
	if now == nil {
		return 0, false
	}
	var d time.Duration
	for pid, cpu := range now {
		d += cpu - before[pid]
	}
	return d, true
}

// procCPU answers a process's CPU time, user and system, from
// /proc/<pid>/stat (in clock ticks of 10 ms).
func procCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
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
