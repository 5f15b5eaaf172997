package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
)

// rest answers whether the runner's River client rests, and how many
// times it started.
func rest(t *testing.T, r backend.Runner) (bool, int64) {
	t.Helper()
	switch r := r.(type) {
	case *jobs.Runner[*sql.Tx]:
		return jobs.Rest(r)
	case *jobs.Runner[pgx.Tx]:
		return jobs.Rest(r)
	}
	t.Fatalf("runner %T", r)
	return false, 0
}

// TestAnIdleNodeRestsAndWakesForWork: a node with no job work stops its
// River client (none of River's loops run: its 50 ms completer, its
// leader election, its polls) and keeps it stopped while its own sweeps
// run every 100 ms; it starts it again at once for new work (an approved
// call), and at the due time of work scheduled while it rested (an
// approval's expiry), then rests again. It counts the client's starts,
// not the CPU: a client that kept running, or that a sweep started, fails
// it.
func TestAnIdleNodeRestsAndWakesForWork(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			restsAndWakes(t, path)
		})
	}
}

func restsAndWakes(t *testing.T, path string) {
	var effects atomic.Int64
	const ttl = 3 * time.Second
	n := startNode(t, path, ttl, &effects, func(o *jobs.Options) {
		// The fallback poll a minute long: only a wake-up runs the work.
		o.SweepEvery, o.RestAfter, o.Poll = 100*time.Millisecond, 300*time.Millisecond, time.Minute
	})
	n.start(t)
	resting := func() bool { r, _ := rest(t, n.runner); return r }
	eventually(t, "the idle node to rest", resting)
	_, before := rest(t, n.runner)
	time.Sleep(1500 * time.Millisecond) // fifteen sweeps
	if r, starts := rest(t, n.runner); !r || starts != before {
		t.Fatalf("over fifteen sweeps of an idle node the client started %d times (resting %v); want none", starts-before, r)
	}

	// New work: two calls wait for approval (their expiries are due
	// later, which starts nothing); one is approved and runs at once.
	ctx := context.Background()
	var ids []string
	for _, to := range []string{"a@acme.test", "b@acme.test"} {
		_, err := n.iv.Invoke(ctx, "email.send", map[string]any{"to": to}, callInv())
		var ar *invoke.ApprovalRequired
		if !errors.As(err, &ar) {
			t.Fatalf("err = %v", err)
		}
		ids = append(ids, ar.ID)
	}
	filed := time.Now()
	if r, starts := rest(t, n.runner); !r || starts != before {
		t.Fatalf("filing two approvals started the client %d times (resting %v); want none before they are due", starts-before, r)
	}
	approver := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}
	approved := time.Now()
	if _, err := n.iv.Resolve(ctx, ids[0], approval.Decision{Approve: true}, approver); err != nil {
		t.Fatal(err)
	}
	for effects.Load() < 1 {
		if time.Since(approved) > 5*time.Second {
			t.Fatal("the approved call did not run within 5s of its approval with a poll of a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the approved call ran %s after its approval", time.Since(approved).Round(time.Millisecond))
	eventually(t, "the node to rest again", resting)

	// Work due later: the other approval expires at its time, the
	// client resting until then.
	for {
		a, err := n.store.GetApproval(ctx, "org-1", ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if a.Status == toolplane.ApprovalExpired {
			break
		}
		if time.Since(filed) > ttl+5*time.Second {
			t.Fatalf("the approval is %s %s after it was filed, its expiry %s", a.Status, time.Since(filed).Round(time.Millisecond), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the approval expired %s after it was filed (ttl %s)", time.Since(filed).Round(time.Millisecond), ttl)
	eventually(t, "the node to rest after the expiry", resting)
	// Two starts, or three when the expiry's worker found it a little
	// early (clocks, a loaded host) and snoozed it to its time.
	if _, starts := rest(t, n.runner); starts < before+2 || starts > before+3 {
		t.Errorf("the client started %d times for an approved call and an expiry; want 2 (3 with a snooze)", starts-before)
	}
}
