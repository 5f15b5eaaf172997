package auditexport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// BenchmarkAuditInsertOutbox measures what the outbox trigger costs an
// audit insert: batches of 256 events (the audit writer's commit) with
// no sink registered, and with one (each event then queues one outbox
// row in the same transaction). ns/op is per batch; ns/event is the
// figure to compare.
func BenchmarkAuditInsertOutbox(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, sinks := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/sinks=%d", kind, sinks), func(b *testing.B) {
				var s store
				if kind == "sqlite" {
					s = sqlitetest.New(b)
				} else {
					s = newPostgres(b)
				}
				if sinks > 0 {
					if err := s.RegisterAuditSink(context.Background(), "bench", time.Now()); err != nil {
						b.Fatal(err)
					}
				}
				type batcher interface {
					AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
				}
				bt := s.(batcher)
				now := time.Now()
				n := 0
				for b.Loop() {
					evs := make([]*toolplane.AuditEvent, 256)
					for i := range evs {
						n++
						evs[i] = &toolplane.AuditEvent{ID: fmt.Sprintf("ev-%09d", n), OrganizationID: "org-a", RunID: "run-1",
							AgentID: "agent-a", Tool: "payments.refund", Outcome: "ok", Source: toolplane.SourceREST,
							Arguments: []byte(`{"amount_cents":100}`), CreatedAt: now.Add(time.Duration(n) * time.Microsecond)}
					}
					if err := bt.AppendAuditBatch(context.Background(), evs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(256*b.N), "ns/event")
			})
		}
	}
}
