package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// TestAuditRetentionJobDropsExpiredEvents: a node given a retention
// policy drops, through River, each organization's events older than it,
// under a checkpoint it signs, records the drop in the chain, and the
// chain verifies before and after.
func TestAuditRetentionJobDropsExpiredEvents(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b, chain := migrated(t, path)
			store := b.Store
			now := time.Now()
			for i, age := range []time.Duration{72 * time.Hour, 50 * time.Hour, 49 * time.Hour, time.Hour, time.Minute} {
				e := &toolplane.AuditEvent{ID: "ev-" + string(rune('0'+i)), OrganizationID: "org-a", Tool: "email.send", Outcome: "ok", CreatedAt: now.Add(-age)}
				if err := store.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			keys := &auditchain.KeySet{}
			if _, err := keys.Generate(now); err != nil {
				t.Fatal(err)
			}
			if rep, err := auditchain.VerifyStore(ctx, chain, keys, "org-a", 0, 0); err != nil || !rep.OK || rep.Events != 5 {
				t.Fatalf("verify before = %+v, %v", rep, err)
			}
			hs := handler.NewRegistry()
			reg, _, err := registry.Build(nil, registry.Options{Bindings: bindings{hs}})
			if err != nil {
				t.Fatal(err)
			}
			quiet := slog.New(slog.DiscardHandler)
			approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
			iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: store, Maint: store, AuditKeys: keys},
				jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: time.Hour, AuditCheckpointEvery: time.Hour,
					AuditRetention: 48 * time.Hour, AuditRetentionEvery: 200 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Stop(context.Background()) })
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				_, first, err := chain.AuditHead(ctx, "org-a")
				if err != nil {
					t.Fatal(err)
				}
				if first == 4 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the job dropped nothing: the first stored event is %d", first)
				}
			}
			evs, err := chain.AuditChain(ctx, "org-a", 0, 0, 10)
			if err != nil || len(evs) != 3 || evs[2].Kind != toolplane.AuditRetention || evs[2].Subject != "events 1-3" {
				t.Fatalf("chain after retention = %+v, %v; want events 4, 5 and the drop's", evs, err)
			}
			// The checkpoint job runs at start too, beside retention, in
			// either order: the walk meets its checkpoint once it has run.
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				rep, err := auditchain.VerifyStore(ctx, chain, keys, "org-a", 0, 0)
				if err != nil || !rep.OK || rep.Anchor != 3 {
					t.Fatalf("verify after = %+v, %v; want OK, anchored on the checkpoint at 3", rep, err)
				}
				if rep.Matched > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("verify after = %+v: no checkpoint after the drop's was met", rep)
				}
			}
		})
	}
}
