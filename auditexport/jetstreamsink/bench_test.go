package jetstreamsink_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// BenchmarkExportBacklog measures how fast a backlog of 100,000 queued
// events drains to JetStream, one exporter, batches of 1,000: the
// events/s metric is the figure.
func BenchmarkExportBacklog(b *testing.B) {
	_, js := natsOrSkip(b)
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			var s store
			if kind == "sqlite" {
				s = sqlitetest.New(b)
			} else {
				s = newPostgres(b)
			}
			const backlog = 100_000
			var total time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				stream, subject := names(b, js)
				x := newExporterBatch(b, s, natsURL, stream, subject, 1000)
				appendEvents(b, s, "org-a", fmt.Sprintf("ev%d", i), backlog)
				b.StartTimer()
				start := time.Now()
				if n := drainAll(b, x); n != backlog {
					b.Fatalf("drained %d, want %d", n, backlog)
				}
				total += time.Since(start)
				b.StopTimer()
				x.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(backlog*b.N)/total.Seconds(), "events/s")
		})
	}
}
