package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// brokenNode is a node whose email.send handler fails with a platform
// fault every time it runs, counting its runs.
func brokenNode(t *testing.T, database string, runs *atomic.Int64, opt jobs.Options) *node {
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
	hs := handler.NewRegistry()
	hb, err := handler.BindFunc("email.send", func(context.Context, handler.Call, any) (any, error) {
		runs.Add(1)
		return nil, errors.New("the mail relay's configuration is missing")
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(hb); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{sendDef()}, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: b.Store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: b.Store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	opt.Logger = quiet
	r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: b.Store, Maint: b.Store}, opt)
	if err != nil {
		t.Fatal(err)
	}
	iv.UseScheduler(r)
	return &node{iv: iv, runner: r, store: b.Store}
}

// An approved call whose execution faults every time is tried
// ExecuteAttempts times and then given up: the trail records it, and
// neither retries nor the approved sweep start it again.
func TestApprovedCallThatNeverRunsIsGivenUpAndRecorded(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) { givenUp(t, path) })
	}
}

func givenUp(t *testing.T, path string) {
	var runs atomic.Int64
	n := brokenNode(t, path, &runs, jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: 200 * time.Millisecond, ExecuteAttempts: 2})
	n.start(t)
	ctx := context.Background()
	_, err := n.iv.Invoke(ctx, "email.send", map[string]any{"to": "jo"}, callInv())
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("err = %v", err)
	}
	if _, err := n.iv.Resolve(ctx, ar.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	var ev toolplane.AuditEvent
	eventually(t, "the execution to be given up", func() bool {
		evs, _, err := n.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{Outcome: "approval_execution_failed"}, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 {
			ev = evs[0]
		}
		return len(evs) == 1
	})
	if ev.ApprovalID != ar.ID || ev.Tool != "email.send" || ev.Source != toolplane.SourceWorker {
		t.Fatalf("audit event = %+v", ev)
	}
	// Several sweeps later, nothing ran again.
	time.Sleep(1500 * time.Millisecond)
	if got := runs.Load(); got != 2 {
		t.Fatalf("the handler ran %d times, want 2 (the attempts, then nothing)", got)
	}
}
