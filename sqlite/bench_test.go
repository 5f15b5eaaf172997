package sqlite

import (
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/storetest"
)

// BenchmarkStore runs the shared store benchmarks on a SQLite file.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) toolplane.Store { return newTestStore(b) })
}

// BenchmarkAppendAuditBatch is the audit writer's commit under load: 32
// read calls' events in one transaction. ns/op is per batch.
func BenchmarkAppendAuditBatch(b *testing.B) {
	s := newTestStore(b)
	ctx := b.Context()
	now := time.Now()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		evs := make([]*toolplane.AuditEvent, 32)
		for j := range evs {
			evs[j] = &toolplane.AuditEvent{
				ID: "ev-" + strconv.Itoa(n), OrganizationID: "org-bench", RunID: "mcp:tpk_1:SESSION", AgentID: "agent-billing",
				PrincipalID: "agent-billing", Tool: "demo.search_tickets", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
				Outcome: "ok", ArgumentsHash: "sha256:4f2a9c0e7b1d3e5f", LatencyMicros: 234, CreatedAt: now.Add(time.Duration(n) * time.Microsecond),
			}
			n++
		}
		if err := s.AppendAuditBatch(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimLifecycleParallel is the journal's writes of a write call
// (the claim, the dispatch mark, and the completion with its audit event)
// from 16 callers at once, each call on a key of its own: the writes that
// contend for SQLite's one writer. ns/op is per call; cpu-µs/op is the
// process's CPU per call, the steadier figure on a shared machine.
func BenchmarkClaimLifecycleParallel(b *testing.B) {
	s := newTestStore(b)
	ctx := b.Context()
	var seq atomic.Int64
	b.SetParallelism(8) // 16 callers on two cores
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			now := time.Now()
			c := &toolplane.Claim{
				OrganizationID: "org-bench", Tool: "load.put_item", Key: "key-" + strconv.FormatInt(n, 10),
				RequestHash: "sha256:4f2a9c0e7b1d3e5f", Status: toolplane.ClaimProcessing, Owner: "node/1/1",
				LeaseUntil: now.Add(time.Minute), Node: "node-1", RunID: "run-" + strconv.FormatInt(n, 10), StepPath: "agent",
				Arguments: []byte(`{"id":"item-1","name":"a name","price_cents":1999}`), Version: n, CreatedAt: now, UpdatedAt: now,
			}
			if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
				b.Fatal(ok, err)
			}
			c.Dispatched, c.Attempts = true, 1
			if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
				b.Fatal(ok, err)
			}
			c.Status, c.Owner, c.Result = toolplane.ClaimCompleted, "", []byte(`{"ok":true,"content":{"id":"item-1"}}`)
			e := &toolplane.AuditEvent{
				ID: toolplane.NewID("aud_"), OrganizationID: "org-bench", RunID: c.RunID, AgentID: "agent-load",
				PrincipalID: "agent-load", Tool: c.Tool, ToolVersion: "1.0.0", Source: toolplane.SourceREST,
				Outcome: "ok", ArgumentsHash: c.RequestHash, LatencyMicros: 900, CreatedAt: now, Key: c.Key,
			}
			if ok, err := s.UpdateClaimAudited(ctx, c, e); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU answers the CPU time, user and system, this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
