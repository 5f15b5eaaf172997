package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// TestAnomalyJobFilesABurst: the periodic job, run by River on a node,
// folds the audit trail into the baselines and files the burst of
// denied refunds that follows a steady history; a second node started
// on the same database continues from the stored watermark and files
// nothing twice.
func TestAnomalyJobFilesABurst(t *testing.T) {
	for name, database := range databases(t) {
		t.Run(name, func(t *testing.T) { anomalyJob(t, database) })
	}
}

func anomalyJob(t *testing.T, database string) {
	ctx := context.Background()
	const window = 5 * time.Minute
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	clock := testclock.New(start)
	org := "org-anomaly"
	var b *backend.Backend
	startTriage := func() *anomaly.Service {
		var err error
		b, err = backend.Open(ctx, database)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		quiet := slog.New(slog.DiscardHandler)
		svc, err := anomaly.New(b.Store, anomaly.Config{Window: window, Backfill: 30, Now: clock.Now, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		hs := handler.NewRegistry()
		hb, _ := handler.BindFunc("email.send", func(context.Context, handler.Call, any) (any, error) { return map[string]any{}, nil }, nil)
		if err := hs.Register(hb); err != nil {
			t.Fatal(err)
		}
		reg, _, err := registry.Build([]toolplane.Definition{sendDef()}, registry.Options{Bindings: bindings{hs}})
		if err != nil {
			t.Fatal(err)
		}
		approvals := approval.New(approval.Config{Store: b.Store, TTL: time.Hour})
		iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: b.Store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: b.Store, Maint: b.Store, Anomalies: svc},
			jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: time.Hour, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = r.Stop(stop)
		})
		return svc
	}

	// The history is written before any node runs: 24 steady windows of
	// refunds, then one with 30 refused.
	b0, err := backend.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b0.Close)
	if err := b0.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var events []*toolplane.AuditEvent
	add := func(i, n int, outcome string) {
		for j := range n {
			events = append(events, &toolplane.AuditEvent{ID: fmt.Sprintf("aud-%d-%s-%d", i, outcome, j), OrganizationID: org,
				RunID: "run", AgentID: "agent-billing", Tool: "payments.refund_order", Source: toolplane.SourceREST,
				Outcome: outcome, CreatedAt: start.Add(time.Duration(i)*window + time.Duration(j)*time.Second)})
		}
	}
	for i := range 25 {
		add(i, 18+i%5, "ok")
		add(i, i%2, "denied")
	}
	add(24, 30, "denied")
	batch, ok := b0.Store.(interface {
		AppendAuditBatch(context.Context, []*toolplane.AuditEvent) error
	})
	if !ok {
		t.Fatalf("%T has no AppendAuditBatch", b0.Store)
	}
	if err := batch.AppendAuditBatch(ctx, events); err != nil {
		t.Fatal(err)
	}
	clock.Advance(25*window + 2*time.Minute)

	svc := startTriage()
	auditor := &toolplane.Credential{ID: "key-ada", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "ada@example.com",
		Roles: []string{toolplane.RoleAuditor}}
	var items []toolplane.Anomaly
	eventually(t, "the burst's denial_rate item", func() bool {
		items, _, err = svc.List(ctx, toolplane.AnomalyOpen, "", 100, auditor)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range items {
			if a.Signal == toolplane.SignalDenialRate && a.AgentID == "agent-billing" && a.Tool == "payments.refund_order" {
				return true
			}
		}
		return false
	})

	// A second node on the same database: the watermark says everything
	// due is folded in, so it files nothing again.
	startTriage()
	eventually(t, "the watermark past the burst", func() bool {
		mark, err := b0.Store.AnomalyWatermark(ctx)
		return err == nil && !mark.Before(start.Add(25*window))
	})
	time.Sleep(200 * time.Millisecond)
	again, _, err := svc.List(ctx, "", "", 100, auditor)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(items) {
		t.Fatalf("after a second node started the items are %d, want the %d filed", len(again), len(items))
	}
}
