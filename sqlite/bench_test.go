package sqlite

import (
	"strconv"
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
