package jetstreamsink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// BenchmarkExportBacklog measures how fast a backlog of 100,000 queued
// events drains to JetStream, one exporter, batches of 1,000: batch by
// batch (Drain, the store and the stream taking turns) and pipelined
// (DrainBacklog, the next batch claimed while the last is acknowledged,
// as Run drains). The events/s metric is the figure.
func BenchmarkExportBacklog(b *testing.B) {
	_, js := natsOrSkip(b)
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, mode := range []string{"batch", "pipeline"} {
			b.Run(kind+"/"+mode, func(b *testing.B) {
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
					var n int
					if mode == "batch" {
						n = drainAll(b, x)
					} else {
						var err error
						if n, err = x.DrainBacklog(context.Background()); err != nil {
							b.Fatal(err)
						}
					}
					if n != backlog {
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
}
