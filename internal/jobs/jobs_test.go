package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/registry"
)

// node is one toolplane node on a shared database: its own pools, store,
// invoker and River runner, as a separate process would have.
type node struct {
	iv     *invoke.Invoker
	runner backend.Runner
	store  backend.Store
}

type bindings struct{ *handler.Registry }

func (bindings) Connection(string) bool   { return true }
func (bindings) FactResolver(string) bool { return true }

func sendDef() toolplane.Definition {
	no := false
	return toolplane.Definition{
		Name: "email.send", Version: "1.0.0", Description: "Send an email.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind:         toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "email.send"}},
		Effect: toolplane.EffectSend, Connection: "mailbox", Repeatable: &no,
		Annotations: toolplane.Annotations{RequiresApproval: true},
	}
}

// databases answers the databases a test runs on: a SQLite file always,
// and a fresh PostgreSQL schema when TOOLPLANE_TEST_POSTGRES is set.
// Without it the PostgreSQL half is a subtest of its own, named as the
// callers name theirs, that skips, so the run reads SKIP rather than a
// PASS that never touched PostgreSQL; under CI, where .ci/run sets it,
// its absence fails.
func databases(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{"sqlite": sqliteFile(t)}
	dsn, ok := pgtest.LookupDSN()
	if !ok {
		t.Run("postgres", func(t *testing.T) {
			const msg = "PostgreSQL not tested: set " + pgtest.DSNVariable + " to a PostgreSQL DSN (for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable)"
			if inCI() {
				t.Fatal(msg + "; under CI it must be set")
			}
			t.Skip(msg)
		})
		return out
	}
	out["postgres"] = pgtest.SchemaDSN(t, dsn)
	return out
}

// sqliteFile answers a fresh SQLite file, for a test that runs on SQLite
// alone.
func sqliteFile(t *testing.T) string {
	return filepath.Join(t.TempDir(), "toolplane.db")
}

// inCI reports whether the tests run under CI, where PostgreSQL must be
// tested rather than skipped.
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

func startNode(t *testing.T, database string, ttl time.Duration, effects *atomic.Int64, tune ...func(*jobs.Options)) *node {
	t.Helper()
	return startNodeWith(t, database, sendDef(), ttl, effects, tune...)
}

func startNodeWith(t *testing.T, database string, def toolplane.Definition, ttl time.Duration, effects *atomic.Int64, tune ...func(*jobs.Options)) *node {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	store := b.Store
	hs := handler.NewRegistry()
	hb, _ := handler.BindFunc("email.send", func(context.Context, handler.Call, any) (any, error) {
		effects.Add(1)
		return map[string]any{"message_id": "m-1"}, nil
	}, nil)
	_ = hs.Register(hb)
	reg, _, err := registry.Build([]toolplane.Definition{def}, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: ttl})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	opt := jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: time.Hour, Logger: quiet}
	for _, f := range tune {
		f(&opt)
	}
	r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: store, Maint: store}, opt)
	if err != nil {
		t.Fatal(err)
	}
	iv.UseScheduler(r)
	return &node{iv: iv, runner: r, store: store}
}

func (n *node) start(t *testing.T) {
	t.Helper()
	if err := n.runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.stop() })
}

func (n *node) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.runner.Stop(ctx)
}

func callInv() *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: "org-1", RunID: "run-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"email.send"}}}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestApprovalSurvivesRestartAndExecutesOnceWithoutTheModel(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { approvalSurvivesRestart(t, path) })
	}
}

func approvalSurvivesRestart(t *testing.T, path string) {
	var effects atomic.Int64
	a := startNode(t, path, time.Hour, &effects)
	a.start(t)
	args := map[string]any{"to": "jo@acme.test"}
	_, err := a.iv.Invoke(context.Background(), "email.send", args, callInv())
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("err = %v", err)
	}
	a.stop() // every node stops

	b := startNode(t, path, time.Hour, &effects)
	b.start(t)
	if _, err := b.iv.Resolve(context.Background(), ar.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the approved call to run", func() bool { return effects.Load() == 1 })
	var r toolplane.Result
	eventually(t, "the approved call to complete", func() bool {
		r, err = b.iv.Invoke(context.Background(), "email.send", args, callInv())
		return !errors.Is(err, invoke.ErrInFlight)
	})
	if err != nil || !r.OK || !r.Meta.Replayed {
		t.Fatalf("the caller's next identical call: %+v %v", r, err)
	}
	time.Sleep(200 * time.Millisecond)
	if effects.Load() != 1 {
		t.Fatalf("effects = %d", effects.Load())
	}
}

func TestApprovalExpiresToDenyOnANodeThatDidNotFileIt(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { approvalExpiresElsewhere(t, path) })
	}
}

func approvalExpiresElsewhere(t *testing.T, path string) {
	var effects atomic.Int64
	filer := startNode(t, path, 300*time.Millisecond, &effects)
	// The filer never runs jobs: it files and goes away.
	_, err := filer.iv.Invoke(context.Background(), "email.send", map[string]any{"to": "jo"}, callInv())
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("err = %v", err)
	}
	other := startNode(t, path, time.Hour, &effects)
	other.start(t)
	eventually(t, "the approval to expire", func() bool {
		got, err := other.store.GetApproval(context.Background(), "org-1", ar.ID)
		return err == nil && got.Status == toolplane.ApprovalExpired
	})
	r, err := other.iv.ExecuteApproved(context.Background(), "org-1", ar.ID)
	if err != nil || r.OK || r.Error.Code != toolplane.CodeRejected || effects.Load() != 0 {
		t.Fatalf("after expiry: %+v %v effects=%d", r, err, effects.Load())
	}
}

func TestSweepsSettleLostClaimsAndRemoveOldRows(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { sweeps(t, path) })
	}
}

func sweeps(t *testing.T, path string) {
	var effects atomic.Int64
	n := startNode(t, path, time.Hour, &effects, func(o *jobs.Options) {
		o.SweepEvery, o.Retention = 100*time.Millisecond, time.Hour
	})
	ctx := context.Background()
	now := time.Now()
	plant := func(key string, status toolplane.ClaimStatus, dispatched bool, lease, updated time.Time) {
		attempts := 0
		if dispatched {
			attempts = 1
		}
		c := &toolplane.Claim{OrganizationID: "org-1", Tool: "email.send", Key: key, RequestHash: "h", Status: status,
			Owner: "dead", LeaseUntil: lease, Dispatched: dispatched, Attempts: attempts, RunID: "run-1",
			CreatedAt: updated, UpdatedAt: updated}
		if ok, err := n.store.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	plant("lost-after-dispatch", toolplane.ClaimProcessing, true, now.Add(-time.Minute), now)
	plant("lost-before-dispatch", toolplane.ClaimProcessing, false, now.Add(-time.Minute), now)
	plant("live", toolplane.ClaimProcessing, true, now.Add(time.Hour), now)
	// Node instances: retention removes one silent past it that holds no
	// claim, and keeps the others.
	for id, beat := range map[string]time.Time{"gone": now.Add(-48 * time.Hour), "holding": now.Add(-48 * time.Hour), "alive": now} {
		if err := n.store.InsertNode(ctx, &toolplane.Node{ID: id, Name: id, StartedAt: beat, HeartbeatAt: beat}); err != nil {
			t.Fatal(err)
		}
	}
	held := &toolplane.Claim{OrganizationID: "org-1", Tool: "email.send", Key: "held", RequestHash: "h", Status: toolplane.ClaimProcessing,
		Owner: "holding/1/1", Node: "holding", LeaseUntil: now.Add(time.Hour), RunID: "run-1", CreatedAt: now, UpdatedAt: now}
	if ok, err := n.store.InsertClaim(ctx, held); !ok || err != nil {
		t.Fatal(ok, err)
	}
	plant("old-completed", toolplane.ClaimCompleted, true, now.Add(-48*time.Hour), now.Add(-48*time.Hour))
	plant("recent-completed", toolplane.ClaimCompleted, true, now.Add(-time.Minute), now)
	n.start(t)
	status := func(key string) string {
		c, err := n.store.GetClaim(ctx, "org-1", "email.send", key)
		if errors.Is(err, toolplane.ErrNotFound) {
			return "gone"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(c.Status)
	}
	eventually(t, "the lease sweep", func() bool {
		return status("lost-after-dispatch") == "uncertain" && status("lost-before-dispatch") == "gone"
	})
	eventually(t, "retention", func() bool { return status("old-completed") == "gone" })
	eventually(t, "node retention", func() bool {
		_, err := n.store.GetNode(ctx, "gone")
		return errors.Is(err, toolplane.ErrNotFound)
	})
	for _, id := range []string{"holding", "alive"} {
		if _, err := n.store.GetNode(ctx, id); err != nil {
			t.Errorf("node %s: %v; want kept", id, err)
		}
	}
	for key, want := range map[string]string{"live": "processing", "recent-completed": "completed"} {
		if got := status(key); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
	}
}

func TestUnansweredApprovalEscalatesToTheNextGroup(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { escalates(t, path) })
	}
}

func escalates(t *testing.T, path string) {
	ctx := context.Background()
	var effects atomic.Int64
	def := sendDef()
	def.Approval = &toolplane.ApprovalPolicy{Chain: []string{"leads", "directors"}, OnTimeout: toolplane.OnTimeoutEscalate, TTL: toolplane.Duration(time.Hour)}
	// alice is a lead, bob a director: each answers their group's approvals.
	n := startNodeWith(t, path, def, time.Hour, &effects)
	n.start(t)
	_, err := n.iv.Invoke(ctx, "email.send", map[string]any{"to": "jo"}, callInv())
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("err = %v", err)
	}
	first, err := n.store.GetApproval(ctx, "org-1", ar.ID)
	if err != nil || first.ApproverGroup != "leads" || first.Level != 0 || first.DefaultOnTimeout != "escalate" {
		t.Fatalf("first approval = %+v %v", first, err)
	}
	// An hour passes with nobody answering: bring the expiry forward and
	// schedule it, as the filing node did for the real time.
	first.ExpiresAt = time.Now().Add(-time.Second)
	if ok, err := n.store.UpdateApproval(ctx, first); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := n.runner.ApprovalFiled(ctx, first); err != nil {
		t.Fatal(err)
	}
	var second *toolplane.Approval
	eventually(t, "the escalation", func() bool {
		as, _, err := n.store.ListApprovals(ctx, "org-1", toolplane.ApprovalPending, "", 10)
		if err != nil || len(as) != 1 || as[0].ID == first.ID {
			return false
		}
		second = &as[0]
		return true
	})
	if second.EscalatedFrom != first.ID || second.ApproverGroup != "directors" || second.Level != 1 || second.ArgumentsHash != first.ArgumentsHash {
		t.Fatalf("second approval = %+v", second)
	}
	old, _ := n.store.GetApproval(ctx, "org-1", first.ID)
	if old.Status != toolplane.ApprovalExpired || !strings.Contains(old.Reason, second.ID) {
		t.Fatalf("first approval after escalation = %+v", old)
	}
	if _, err := n.iv.ExecuteApproved(ctx, "org-1", first.ID); !errors.Is(err, invoke.ErrNotResolved) {
		t.Fatalf("the escalated approval must not execute or deny: %v", err)
	}
	// The caller asking again waits on the escalated approval.
	_, err = n.iv.Invoke(ctx, "email.send", map[string]any{"to": "jo"}, callInv())
	if !errors.As(err, &ar) || ar.ID != second.ID {
		t.Fatalf("identical call: %v", err)
	}
	if _, err := n.iv.Resolve(ctx, second.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover, toolplane.GroupRolePrefix + "leads"}}); !errors.Is(err, approval.ErrNotAuthorized) {
		t.Fatalf("a lead answered the directors' approval: %v", err)
	}
	if _, err := n.iv.Resolve(ctx, second.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "bob", Roles: []string{toolplane.RoleApprover, toolplane.GroupRolePrefix + "directors"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the approved call to run", func() bool { return effects.Load() == 1 })
	evs, _, err := n.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{Outcome: "approval_escalated"}, "", 10)
	if err != nil || len(evs) != 1 || evs[0].ApprovalID != first.ID || evs[0].AuthorizedBy != second.ID {
		t.Fatalf("escalation audit = %+v %v", evs, err)
	}
}

func TestLostReplayableCallRunsAgainFromAWorker(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { replaysLost(t, path) })
	}
}

func replaysLost(t *testing.T, path string) {
	ctx := context.Background()
	var effects atomic.Int64
	def := sendDef()
	def.Annotations = toolplane.Annotations{Idempotent: true}
	def.Replay = &toolplane.Replay{MaxAttempts: 2}
	n := startNodeWith(t, path, def, time.Hour, &effects, func(o *jobs.Options) { o.SweepEvery = 100 * time.Millisecond })
	// A worker took the call, marked it dispatched and was lost.
	in := callInv()
	args := map[string]any{"to": "jo"}
	argsJSON, _ := json.Marshal(args)
	invJSON, _ := json.Marshal(in)
	hash, _ := canonical.HashJSON(argsJSON)
	now := time.Now()
	lost := &toolplane.Claim{OrganizationID: "org-1", Tool: "email.send", Key: invoke.Key(in, hash), RequestHash: hash,
		Status: toolplane.ClaimProcessing, Owner: "lost-node", LeaseUntil: now.Add(-time.Second), Dispatched: true, Attempts: 1,
		RunID: in.RunID, StepPath: in.StepPath, Arguments: argsJSON, Invocation: invJSON, CreatedAt: now, UpdatedAt: now}
	if ok, err := n.store.InsertClaim(ctx, lost); !ok || err != nil {
		t.Fatal(ok, err)
	}
	n.start(t)
	eventually(t, "the worker's replay", func() bool {
		c, err := n.store.GetClaim(ctx, "org-1", "email.send", lost.Key)
		return err == nil && c.Status == toolplane.ClaimCompleted
	})
	c, _ := n.store.GetClaim(ctx, "org-1", "email.send", lost.Key)
	if effects.Load() != 1 || c.Attempts != 2 {
		t.Fatalf("effects=%d attempts=%d", effects.Load(), c.Attempts)
	}
	r, err := n.iv.Invoke(ctx, "email.send", args, in)
	if err != nil || !r.OK || !r.Meta.Replayed || effects.Load() != 1 {
		t.Fatalf("the caller's identical call: %+v %v effects=%d", r, err, effects.Load())
	}
}

// A lost call, dispatched, that a worker may replay but whose replay is
// refused (the live principal no longer holds the tool, its stored
// arguments no longer fit the schema, policy now asks a person) will not
// run again from a worker: it becomes an uncertain action, audited once by
// the sweep, instead of staying processing and being re-enqueued by every
// sweep.
func TestRefusedReplayOfALostCallEndsUncertain(t *testing.T) {
	tests := []struct {
		name string
		tune func(def *toolplane.Definition, in *toolplane.Invocation, args map[string]any)
	}{
		{"denied", func(_ *toolplane.Definition, in *toolplane.Invocation, _ map[string]any) { in.Principal.Tools = nil }},
		{"invalid input", func(_ *toolplane.Definition, _ *toolplane.Invocation, args map[string]any) { args["to"] = 5 }},
		{"needs approval", func(def *toolplane.Definition, _ *toolplane.Invocation, _ map[string]any) {
			def.Annotations.RequiresApproval = true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, path := range databases(t) {
				t.Run(name, func(t *testing.T) { refusedReplay(t, path, tt.tune) })
			}
		})
	}
}

func refusedReplay(t *testing.T, path string, tune func(*toolplane.Definition, *toolplane.Invocation, map[string]any)) {
	ctx := context.Background()
	var effects atomic.Int64
	def := sendDef()
	def.Annotations = toolplane.Annotations{Idempotent: true}
	def.Replay = &toolplane.Replay{MaxAttempts: 2}
	in := callInv()
	args := map[string]any{"to": "jo"}
	tune(&def, in, args)
	n := startNodeWith(t, path, def, time.Hour, &effects, func(o *jobs.Options) { o.SweepEvery = 100 * time.Millisecond })
	argsJSON, _ := json.Marshal(args)
	invJSON, _ := json.Marshal(in)
	hash, _ := canonical.HashJSON(argsJSON)
	now := time.Now()
	lost := &toolplane.Claim{OrganizationID: "org-1", Tool: "email.send", Key: invoke.Key(in, hash), RequestHash: hash,
		Status: toolplane.ClaimProcessing, Owner: "lost-node", LeaseUntil: now.Add(-time.Second), Dispatched: true, Attempts: 1,
		RunID: in.RunID, StepPath: in.StepPath, Arguments: argsJSON, Invocation: invJSON, CreatedAt: now, UpdatedAt: now}
	if ok, err := n.store.InsertClaim(ctx, lost); !ok || err != nil {
		t.Fatal(ok, err)
	}
	n.start(t)
	eventually(t, "the lost call to become uncertain", func() bool {
		c, err := n.store.GetClaim(ctx, "org-1", "email.send", lost.Key)
		return err == nil && c.Status == toolplane.ClaimUncertain
	})
	time.Sleep(300 * time.Millisecond) // more sweeps: none may audit it again
	evs, _, err := n.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var swept int
	for _, e := range evs {
		if e.Key == lost.Key && e.Source == toolplane.SourceSweep && e.Outcome == string(toolplane.CodeUncertain) {
			swept++
		}
	}
	if swept != 1 || effects.Load() != 0 {
		t.Fatalf("uncertain events from the sweep = %d, effects = %d; want 1, 0 (events %+v)", swept, effects.Load(), evs)
	}
}

// The lease sweep audits every state it decides, in the same transaction
// as the change: a lost call released (it never reached its handler) and
// a lost call made uncertain each have one event, from the sweep, naming
// the key, run, agent and why. Claims of a node known dead are decided
// without waiting for their leases; a live claim, and one of the sweeping
// node itself though its heartbeat is behind, is left, unaudited.
func TestSweepAuditsWhatItDecides(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { sweepAudits(t, path) })
	}
}

func sweepAudits(t *testing.T, path string) {
	var effects atomic.Int64
	const deadAfter = 10 * time.Second
	n := startNode(t, path, time.Hour, &effects, func(o *jobs.Options) {
		o.SweepEvery, o.DeadAfter, o.Node = 100*time.Millisecond, deadAfter, "self-node"
	})
	ctx := context.Background()
	now := time.Now()
	// self-node is the sweeping node, its heartbeat behind (a long pause):
	// it is running its claims, and does not judge them dead.
	for id, beat := range map[string]time.Time{"dead-node": now.Add(-time.Minute), "live-node": now.Add(time.Hour), "self-node": now.Add(-time.Minute)} {
		if err := n.store.InsertNode(ctx, &toolplane.Node{ID: id, Name: id, StartedAt: beat, HeartbeatAt: beat}); err != nil {
			t.Fatal(err)
		}
	}
	inv, _ := json.Marshal(toolplane.Invocation{OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", Principal: toolplane.Principal{ID: "agent-1"}})
	plant := func(key, node string, dispatched bool, lease time.Time) {
		attempts := 0
		if dispatched {
			attempts = 1
		}
		c := &toolplane.Claim{OrganizationID: "org-1", Tool: "email.send", Key: key, RequestHash: "h-" + key, Status: toolplane.ClaimProcessing,
			Owner: "w", LeaseUntil: lease, Dispatched: dispatched, Attempts: attempts, RunID: "run-1", Node: node,
			Arguments: []byte(`{"to":"secret@example.com"}`), Invocation: inv, CreatedAt: now, UpdatedAt: now}
		if ok, err := n.store.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	plant("lost-after-dispatch", "", true, now.Add(-time.Minute))
	plant("lost-before-dispatch", "", false, now.Add(-time.Minute))
	plant("dead-node-dispatched", "dead-node", true, now.Add(time.Hour))
	plant("dead-node-undispatched", "dead-node", false, now.Add(time.Hour))
	plant("live", "live-node", true, now.Add(time.Hour))
	plant("own", "self-node", true, now.Add(time.Hour))
	n.start(t)
	want := map[string]string{
		"lost-after-dispatch": "uncertain", "lost-before-dispatch": jobs.ReleasedOutcome,
		"dead-node-dispatched": "uncertain", "dead-node-undispatched": jobs.ReleasedOutcome,
	}
	byKey := map[string][]toolplane.AuditEvent{}
	eventually(t, "the lease sweep", func() bool {
		evs, _, err := n.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		byKey = map[string][]toolplane.AuditEvent{}
		for _, e := range evs {
			byKey[e.Key] = append(byKey[e.Key], e)
		}
		return len(byKey) >= len(want)
	})
	time.Sleep(300 * time.Millisecond) // more sweeps: none may audit twice
	evs, _, _ := n.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 100)
	if len(evs) != len(want) {
		t.Fatalf("%d events after repeated sweeps, want %d: %+v", len(evs), len(want), evs)
	}
	for key, outcome := range want {
		es := byKey[key]
		if len(es) != 1 {
			t.Fatalf("%s: events %+v, want one", key, es)
		}
		e := es[0]
		if e.Outcome != outcome || e.Source != toolplane.SourceSweep || e.RunID != "run-1" || e.AgentID != "agent-1" ||
			e.ArgumentsHash != "h-"+key || e.Tool != "email.send" || e.Reason == "" {
			t.Errorf("%s: event %+v, want %s from the sweep", key, e, outcome)
		}
		c, err := n.store.GetClaim(ctx, "org-1", "email.send", key)
		switch {
		case outcome == "uncertain" && (err != nil || c.Status != toolplane.ClaimUncertain):
			t.Errorf("%s: claim %+v, %v; want uncertain", key, c, err)
		case outcome == jobs.ReleasedOutcome && !errors.Is(err, toolplane.ErrNotFound):
			t.Errorf("%s: claim %+v, %v; want released", key, c, err)
		}
	}
	for _, key := range []string{"live", "own"} {
		if c, err := n.store.GetClaim(ctx, "org-1", "email.send", key); err != nil || c.Status != toolplane.ClaimProcessing {
			t.Errorf("%s claim: %+v, %v", key, c, err)
		}
	}
	if b, _ := json.Marshal(evs); strings.Contains(string(b), "secret@example.com") {
		t.Errorf("an event carries the arguments: %s", b)
	}
}

// A registered node heartbeats until its context ends; registering again
// under its name retires the earlier instance, whose late heartbeats do
// not revive it.
func TestNodeHeartbeatsAndARestartRetiresItsEarlierInstance(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b, err := backend.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Close)
			if err := b.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			quiet := slog.New(slog.DiscardHandler)
			first, err := jobs.Register(ctx, b.Store, "node-a", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			beating, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { jobs.Heartbeat(beating, b.Store, first, 10*time.Millisecond, nil, quiet); close(done) }()
			eventually(t, "a heartbeat", func() bool {
				n, err := b.Store.GetNode(ctx, first.ID)
				return err == nil && n.HeartbeatAt.After(first.HeartbeatAt)
			})
			second, err := jobs.Register(ctx, b.Store, "node-a", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if second.ID == first.ID {
				t.Fatalf("a restart reused the instance id %s", first.ID)
			}
			time.Sleep(50 * time.Millisecond) // the earlier instance keeps beating
			if n, err := b.Store.GetNode(ctx, first.ID); err != nil || !n.HeartbeatAt.Equal(time.Unix(0, 0)) {
				t.Fatalf("earlier instance after the restart = %+v, %v; want retired", n, err)
			}
			stop()
			<-done
		})
	}
}

// A node name whose instance id River could not take as its client's name
// is refused with a clear error; the longest one taken makes an id River
// takes.
func TestRegisterRefusesANodeNameRiverCannotName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := backend.Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := jobs.Register(ctx, b.Store, strings.Repeat("n", jobs.MaxNodeName), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(n.ID) > 100 {
		t.Errorf("instance id of %d bytes; River takes at most 100", len(n.ID))
	}
	if _, err := jobs.Register(ctx, b.Store, strings.Repeat("n", jobs.MaxNodeName+1), time.Now()); !errors.Is(err, jobs.ErrNodeName) {
		t.Errorf("a name one byte longer: %v; want ErrNodeName", err)
	}
}
