package anomaly_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// BenchmarkStepWindow measures folding one window of an organization with
// pairs agents and tools, each with a few calls, into baselines that are
// already warm (SQLite): the work of the periodic job per window.
func BenchmarkStepWindow(b *testing.B) {
	for _, pairs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pairs=%d", pairs), func(b *testing.B) {
			s := sqlitetest.New(b)
			clock := testclock.New(t0.Add(settle))
			svc, err := anomaly.New(s, anomaly.Config{Window: window, Settle: settle, Backfill: 1, MaxWindows: 1, Now: clock.Now,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := svc.Step(ctx); err != nil {
				b.Fatal(err)
			}
			n := 0
			fill := func(w int) {
				start := t0.Add(time.Duration(w) * window)
				events := make([]*toolplane.AuditEvent, 0, pairs*3)
				for p := range pairs {
					for j := range 3 {
						n++
						events = append(events, &toolplane.AuditEvent{ID: fmt.Sprintf("aud-%d", n), OrganizationID: "org-bench",
							RunID: "run", AgentID: fmt.Sprintf("agent-%d", p%50), Tool: fmt.Sprintf("tool.%d", p/50), Source: toolplane.SourceREST,
							Outcome: "ok", CostCents: 3, CreatedAt: start.Add(time.Duration(j) * time.Second)})
					}
				}
				if err := s.AppendAuditBatch(ctx, events); err != nil {
					b.Fatal(err)
				}
			}
			w := 0
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				fill(w)
				clock.Advance(window)
				w++
				b.StartTimer()
				rep, err := svc.Step(ctx)
				if err != nil || rep.Windows != 1 {
					b.Fatalf("Step = %+v, %v", rep, err)
				}
			}
		})
	}
}
