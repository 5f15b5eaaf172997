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
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// TestAuditCheckpointJobSignsTheChains: a node given the operator's keys
// signs, through River, a checkpoint of each organization's chain that
// moved, and the chain verifies against it.
func TestAuditCheckpointJobSignsTheChains(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b, chain := migrated(t, path)
			store := b.Store
			for i, org := range []string{"org-a", "org-a", "org-b"} {
				e := &toolplane.AuditEvent{ID: "ev-" + string(rune('0'+i)), OrganizationID: org, Tool: "email.send", Outcome: "ok", CreatedAt: time.Now()}
				if err := store.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			keys := &auditchain.KeySet{}
			if _, err := keys.Generate(time.Now()); err != nil {
				t.Fatal(err)
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
				jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: time.Hour, AuditCheckpointEvery: 200 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Stop(context.Background()) })
			want := map[string]int64{"org-a": 2, "org-b": 1}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				done := true
				for org, seq := range want {
					cps, err := chain.AuditCheckpoints(ctx, org, 0, 0)
					if err != nil {
						t.Fatal(err)
					}
					done = done && len(cps) > 0 && cps[len(cps)-1].Seq == seq
				}
				if done {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the job signed no checkpoint of every chain")
				}
			}
			for org := range want {
				rep, err := auditchain.VerifyStore(ctx, chain, keys, org, 0, 0)
				if err != nil || !rep.OK || rep.Matched == 0 {
					t.Fatalf("verify %s = %+v, %v; want OK with its checkpoint matched", org, rep, err)
				}
			}
		})
	}
}

// migrated opens the backend at path, migrated, with its audit chain.
func migrated(t *testing.T, path string) (*backend.Backend, toolplane.AuditChainStore) {
	t.Helper()
	b, err := backend.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b, b.Store.(toolplane.AuditChainStore)
}
