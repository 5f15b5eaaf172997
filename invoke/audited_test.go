package invoke_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/sqlite"
)

// failingCompletion is a store that cannot store a completed claim (its
// disk is full, its connection dropped), and stores everything else.
type failingCompletion struct{ *sqlite.Store }

var errDiskFull = errors.New("disk full")

func (f failingCompletion) UpdateClaimAudited(ctx context.Context, c *toolplane.Claim, e *toolplane.AuditEvent) (bool, error) {
	if c.Status == toolplane.ClaimCompleted {
		return false, errDiskFull
	}
	return f.Store.UpdateClaimAudited(ctx, c, e)
}

// CompleteClaimAudited is the completion's narrower write
// (toolplane.ClaimCompleter), which the journal prefers: it fails too.
func (f failingCompletion) CompleteClaimAudited(context.Context, *toolplane.Claim, *toolplane.AuditEvent) (bool, error) {
	return false, errDiskFull
}

// A write whose completion (and the audit event stored with it) could not
// be stored still leaves an audit event of the call: the effect happened,
// and no effect goes without its event.
func TestAFailedCompletionIsStillAudited(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	e := newEnvWith(t, store, func(c *invoke.Config) { c.Store = failingCompletion{store} },
		tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	_, err := e.iv.Invoke(context.Background(), "crm.update", args("to", "a"), inv("crm.update"))
	if !errors.Is(err, invoke.ErrFault) {
		t.Fatalf("err = %v, want a fault", err)
	}
	if e.count("crm.update") != 1 {
		t.Fatalf("handler ran %d times, want 1", e.count("crm.update"))
	}
	evs, _, err := store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{Tool: "crm.update"}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("audit events = %+v, want the call's one", evs)
	}
}
