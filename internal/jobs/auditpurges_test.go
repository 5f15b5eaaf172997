package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// TestAuditPurgesJobFinishesAPurgeConfirmedByANodeThatStopped: a purge
// whose confirmation was stored by a node that stopped before dropping
// (the store's confirmation with its event, and nothing after) is
// finished through River by a node given the purges: the range dropped
// once under its checkpoint, the purge done with one completion event,
// and the chain verifies.
func TestAuditPurgesJobFinishesAPurgeConfirmedByANodeThatStopped(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b, chain := migrated(t, path)
			store := b.Store
			ps, ok := store.(audit.PurgeStore)
			if !ok {
				t.Fatalf("%T keeps no purges", store)
			}
			now := time.Now()
			for i, age := range []time.Duration{72 * time.Hour, 50 * time.Hour, 49 * time.Hour, time.Hour} {
				e := &toolplane.AuditEvent{ID: "ev-" + string(rune('0'+i)), OrganizationID: "org-a", Tool: "email.send", Outcome: "ok", CreatedAt: now.Add(-age)}
				if err := store.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			keys := &auditchain.KeySet{}
			if _, err := keys.Generate(now); err != nil {
				t.Fatal(err)
			}
			purges := audit.NewPurges(audit.PurgesConfig{Store: ps, Keys: keys, ResumeAfter: time.Second})
			ada := &toolplane.Credential{ID: "tpk_ada", OrganizationID: "org-a", Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RolePlatformAdmin}}
			pr, err := purges.Propose(ctx, now.Add(-48*time.Hour), ada)
			if err != nil {
				t.Fatal(err)
			}
			// The confirming node stored the confirmation and stopped.
			grace := &toolplane.Credential{ID: "tpk_grace", OrganizationID: "org-a", Kind: toolplane.CredentialPerson, Subject: "grace", Roles: []string{toolplane.RolePlatformAdmin}}
			at := time.Now().Add(-time.Minute)
			if ok, err := ps.ConfirmAuditPurge(ctx, "org-a", pr.ID, "grace", at, toolplane.ControlEvent(grace, toolplane.AuditRetention, "confirmed", pr.ID, at)); err != nil || !ok {
				t.Fatalf("ConfirmAuditPurge = %v, %v", ok, err)
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
			// No retention policy: the purge job alone drops.
			r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: store, Maint: store, AuditKeys: keys, AuditPurges: purges},
				jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: time.Hour, AuditCheckpointEvery: time.Hour,
					AuditPurgesEvery: 200 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Stop(context.Background()) })
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				got, err := ps.GetAuditPurge(ctx, "org-a", pr.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !got.DoneAt.IsZero() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the job did not finish the purge: %+v", got)
				}
			}
			if _, first, err := chain.AuditHead(ctx, "org-a"); err != nil || first != 4 {
				t.Fatalf("the first stored event is %d, %v; want 4", first, err)
			}
			evs, err := chain.AuditChain(ctx, "org-a", 0, 0, 20)
			if err != nil {
				t.Fatal(err)
			}
			n := map[string]int{}
			for _, e := range evs {
				if e.Kind == toolplane.AuditRetention {
					n[e.Outcome]++
				}
			}
			if n["confirmed"] != 1 || n["dropped"] != 1 || n["completed"] != 1 {
				t.Fatalf("retention events = %v; want one confirmation, one drop and one completion", n)
			}
			rep, err := auditchain.VerifyStore(ctx, chain, keys, "org-a", 0, 0)
			if err != nil || !rep.OK || rep.Anchor != 3 {
				t.Fatalf("verify after = %+v, %v; want OK, anchored on the checkpoint at 3", rep, err)
			}
		})
	}
}
