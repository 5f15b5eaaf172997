package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/invoke"
)

// TestNewWorkWakesItsQueueWithoutThePoll: with the fallback poll a minute
// long, approved calls still run within a few seconds of their approval,
// one alone and a burst whose enqueues fall within one cooldown of each
// other (on PostgreSQL River notifies the first of them only; the trailing
// wake-up tells of the rest; on SQLite River wakes the producer itself).
// A queue that waited for its poll would run them a minute late.
func TestNewWorkWakesItsQueueWithoutThePoll(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, burst := range []int{1, 12} {
				t.Run(fmt.Sprintf("burst=%d", burst), func(t *testing.T) { wakes(t, path, burst) })
			}
		})
	}
}

func wakes(t *testing.T, path string, burst int) {
	var effects atomic.Int64
	n := startNode(t, path, time.Hour, &effects, func(o *jobs.Options) { o.Poll = time.Minute })
	n.start(t)
	ctx := context.Background()
	ids := make([]string, burst)
	for i := range ids {
		_, err := n.iv.Invoke(ctx, "email.send", map[string]any{"to": fmt.Sprintf("%d-%d@acme.test", burst, i)}, callInv())
		var ar *invoke.ApprovalRequired
		if !errors.As(err, &ar) {
			t.Fatalf("err = %v", err)
		}
		ids[i] = ar.ID
	}
	// Past the runner's start, whose first fetches would find the work
	// without any wake-up.
	time.Sleep(500 * time.Millisecond)
	before := effects.Load()
	approver := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}
	start := time.Now()
	// At once, so the enqueues fall within one cooldown: River notifies
	// the first alone.
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if _, err := n.iv.Resolve(ctx, id, approval.Decision{Approve: true}, approver); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Well under the minute's poll; generous for a loaded host.
	const bound = 10 * time.Second
	for effects.Load()-before < int64(burst) {
		if time.Since(start) > bound {
			t.Fatalf("%d of %d approved calls ran within %s with a poll of a minute", effects.Load()-before, burst, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d approved calls ran %s after the first approval", burst, time.Since(start).Round(time.Millisecond))
}
