package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
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

// TestARestThatRunsOutOfTimeStillWakes: the keeper decides to rest (no
// job in hand, none due), and between its read of the due jobs and
// River's Stop this node inserts an approved call that River fetches at
// once, so Stop waits for it. rest() bounds Stop by a minute; a job
// longer than that (scaled here: Stop bounded by 200 ms, the job 1 s)
// makes Stop return its context's error while River goes on stopping the
// client. The keeper waits for that stop and starts the client again, so
// work told afterwards still runs on a single (SQLite) node.
func TestARestThatRunsOutOfTimeStillWakes(t *testing.T) {
	ctx := context.Background()
	b, err := backend.Open(ctx, sqliteFile(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var effects atomic.Int64
	slowIn, slowOut := make(chan struct{}), make(chan struct{})
	hs := handler.NewRegistry()
	hb, _ := handler.BindFunc("email.send", func(_ context.Context, _ handler.Call, in any) (any, error) {
		if m, _ := in.(map[string]any); m["to"] == "slow@acme.test" {
			close(slowIn)
			time.Sleep(time.Second)
			defer close(slowOut)
		}
		effects.Add(1)
		return map[string]any{"message_id": "m-1"}, nil
	}, nil)
	_ = hs.Register(hb)
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
	r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: b.Store, Maint: b.Store},
		jobs.Options{Poll: 50 * time.Millisecond, SweepEvery: 100 * time.Millisecond, RestAfter: 300 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	iv.UseScheduler(r)
	approver := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}
	file := func(to string) string {
		_, err := iv.Invoke(ctx, "email.send", map[string]any{"to": to}, callInv())
		var ar *invoke.ApprovalRequired
		if !errors.As(err, &ar) {
			t.Fatalf("err = %v", err)
		}
		return ar.ID
	}
	slow, fast := file("slow@acme.test"), file("fast@acme.test")

	rr := r.(*jobs.Runner[*sql.Tx])
	var once sync.Once
	jobs.WrapRestStop(rr, func(stop func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			raced := false
			once.Do(func() {
				// The interleaving: an approval resolved on this node just
				// after the keeper read no job due; River fetches it.
				if _, err := iv.Resolve(context.Background(), slow, approval.Decision{Approve: true}, approver); err != nil {
					t.Error(err)
				}
				select {
				case <-slowIn:
				case <-time.After(5 * time.Second):
					t.Error("the slow call was not fetched")
				}
				raced = true
			})
			if raced {
				// rest()'s minute, scaled to the 1 s job.
				c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				return stop(c)
			}
			return stop(ctx)
		}
	})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Stop(c)
	})
	<-slowOut // the first rest raced; the slow call ran
	if _, err := iv.Resolve(ctx, fast, approval.Decision{Approve: true}, approver); err != nil {
		t.Fatal(err)
	}
	approved := time.Now()
	for effects.Load() < 2 {
		if time.Since(approved) > 10*time.Second {
			resting, starts := jobs.Rest(rr)
			t.Fatalf("an approved call did not run within 10 s (sweeps every 100 ms, poll 50 ms): resting %v, starts %d", resting, starts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
