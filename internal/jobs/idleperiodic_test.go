package jobs_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// TestPeriodicJobsWithNothingToDoLeaveTheClientResting: the audit purges
// and the anomaly step, each every 200 ms, start a resting node's River
// client only when they have work. Over seven periods with no purge
// pending and no call in the trail the client stays at rest; a purge
// confirmed (and left by its confirmer) starts it and is finished within
// a few periods, and so is a call, folded into the anomaly baselines.
func TestPeriodicJobsWithNothingToDoLeaveTheClientResting(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, _ := migrated(t, path)
			store := b.Store
			ps, ok := store.(audit.PurgeStore)
			if !ok {
				t.Fatalf("%T keeps no purges", store)
			}
			now := time.Now()
			for i, age := range []time.Duration{72 * time.Hour, 49 * time.Hour} {
				e := &toolplane.AuditEvent{ID: "ev-" + string(rune('0'+i)), OrganizationID: "org-a", Tool: "email.send", Outcome: "ok", CreatedAt: now.Add(-age)}
				if err := store.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			keys := &auditchain.KeySet{}
			if _, err := keys.Generate(now); err != nil {
				t.Fatal(err)
			}
			quiet := slog.New(slog.DiscardHandler)
			purges := audit.NewPurges(audit.PurgesConfig{Store: ps, Keys: keys, ResumeAfter: time.Millisecond})
			const period = 200 * time.Millisecond
			triage, err := anomaly.New(store, anomaly.Config{Window: period, Settle: 50 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			r := startRestingRunner(t, b, jobs.Deps{AuditPurges: purges, Anomalies: triage}, jobs.Options{AuditPurgesEvery: period})
			resting := func() bool { ok, _ := rest(t, r); return ok }
			eventually(t, "the idle node to rest", resting)
			_, before := rest(t, r)
			time.Sleep(7 * period)
			if ok, starts := rest(t, r); !ok || starts != before {
				t.Fatalf("over seven periods with nothing to do the client started %d times (resting %v); want none", starts-before, ok)
			}

			// A confirmed purge its confirmer did not finish.
			ada := &toolplane.Credential{ID: "tpk_ada", OrganizationID: "org-a", Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RolePlatformAdmin}}
			pr, err := purges.Propose(ctx, now.Add(-48*time.Hour), ada)
			if err != nil {
				t.Fatal(err)
			}
			grace := &toolplane.Credential{ID: "tpk_grace", OrganizationID: "org-a", Kind: toolplane.CredentialPerson, Subject: "grace", Roles: []string{toolplane.RolePlatformAdmin}}
			at := time.Now()
			if ok, err := ps.ConfirmAuditPurge(ctx, "org-a", pr.ID, "grace", at, toolplane.ControlEvent(grace, toolplane.AuditRetention, "confirmed", pr.ID, at)); err != nil || !ok {
				t.Fatalf("ConfirmAuditPurge = %v, %v", ok, err)
			}
			for deadline := at.Add(10 * period); ; time.Sleep(20 * time.Millisecond) {
				got, err := ps.GetAuditPurge(ctx, "org-a", pr.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !got.DoneAt.IsZero() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the purge confirmed %s ago is not finished", time.Since(at).Round(time.Millisecond))
				}
			}
			t.Logf("the purge was finished %s after its confirmation", time.Since(at).Round(time.Millisecond))
			_, afterPurge := rest(t, r)
			if afterPurge == before {
				t.Fatal("the purge was finished with no start of the client")
			}

			// A call: folded in by a Step once its window settles.
			eventually(t, "the node to rest after the purge", resting)
			call := time.Now()
			if err := store.AppendAudit(ctx, &toolplane.AuditEvent{ID: "ev-call", OrganizationID: "org-b", AgentID: "agent-1", Tool: "email.send",
				Outcome: "ok", CreatedAt: call}); err != nil {
				t.Fatal(err)
			}
			for deadline := call.Add(10 * period); ; time.Sleep(20 * time.Millisecond) {
				bs, err := store.ListAnomalyBaselines(ctx, "org-b")
				if err != nil {
					t.Fatal(err)
				}
				if len(bs) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the call of %s ago is not folded in", time.Since(call).Round(time.Millisecond))
				}
			}
			t.Logf("the call was folded in %s after it", time.Since(call).Round(time.Millisecond))
			if _, starts := rest(t, r); starts == afterPurge {
				t.Fatal("the call was folded in with no start of the client")
			}
		})
	}
}

// TestAuditCheckpointJobRunsForAMovedChainOnly: the audit checkpoint,
// every 200 ms, starts a resting node's River client only while a chain
// has moved past its newest checkpoint: not over seven periods once every
// chain is signed, and again for an event appended, whose checkpoint is
// then signed within a few periods.
func TestAuditCheckpointJobRunsForAMovedChainOnly(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, chain := migrated(t, path)
			store := b.Store
			appendEvent := func(id string) {
				t.Helper()
				e := &toolplane.AuditEvent{ID: id, OrganizationID: "org-a", Tool: "email.send", Outcome: "ok", CreatedAt: time.Now()}
				if err := store.AppendAudit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			signed := func(seq int64) func() bool {
				return func() bool {
					cps, err := chain.AuditCheckpoints(ctx, "org-a", seq, seq)
					if err != nil {
						t.Fatal(err)
					}
					return len(cps) == 1
				}
			}
			appendEvent("ev-1")
			keys := &auditchain.KeySet{}
			if _, err := keys.Generate(time.Now()); err != nil {
				t.Fatal(err)
			}
			const period = 200 * time.Millisecond
			r := startRestingRunner(t, b, jobs.Deps{AuditKeys: keys}, jobs.Options{AuditCheckpointEvery: period})
			eventually(t, "the first checkpoint", signed(1))
			resting := func() bool { ok, _ := rest(t, r); return ok }
			eventually(t, "the idle node to rest", resting)
			_, before := rest(t, r)
			time.Sleep(7 * period)
			if ok, starts := rest(t, r); !ok || starts != before {
				t.Fatalf("over seven periods with every chain signed the client started %d times (resting %v); want none", starts-before, ok)
			}
			appendEvent("ev-2")
			at := time.Now()
			for !signed(2)() {
				if time.Since(at) > 10*period {
					t.Fatalf("the chain moved %s ago is not signed", time.Since(at).Round(time.Millisecond))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if _, starts := rest(t, r); starts == before {
				t.Fatal("the moved chain was signed with no start of the client")
			}
		})
	}
}

// startRestingRunner starts a runner on b's store with the periodic jobs
// deps and opts name, over an invoker with no tools: no polling to speak
// of, no sweep, and a rest after 300 ms with nothing to do, so a test
// sees what starts its River client. It is stopped when the test ends.
func startRestingRunner(t *testing.T, b *backend.Backend, deps jobs.Deps, opts jobs.Options) backend.Runner {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	hs := handler.NewRegistry()
	reg, _, err := registry.Build(nil, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	approvals := approval.New(approval.Config{Store: b.Store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: b.Store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	deps.Invoker, deps.Approvals, deps.Store, deps.Maint = iv, approvals, b.Store, b.Store
	opts.Poll, opts.SweepEvery, opts.RestAfter, opts.Logger = time.Minute, time.Hour, 300*time.Millisecond, quiet
	r, err := b.Runner(deps, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Stop(stop)
	})
	return r
}
