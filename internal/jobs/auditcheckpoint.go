package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// AuditCheckpointArgs: sign a checkpoint of every organization's audit
// chain that moved since its last (auditchain.Checkpoint).
type AuditCheckpointArgs struct {
	// Period is the start of the period the job runs for (Unix
	// microseconds): with it the job is unique per period across the
	// nodes (see clock.go). Zero in a job an earlier version enqueued.
	Period int64 `json:"period,omitempty"`
}

// Kind names the job for River.
func (AuditCheckpointArgs) Kind() string { return "toolplane_audit_checkpoint" }

type auditCheckpointWorker struct {
	river.WorkerDefaults[AuditCheckpointArgs]
	w *work
}

// Timeout bounds one pass; what it did not reach, the next pass does.
func (x *auditCheckpointWorker) Timeout(*river.Job[AuditCheckpointArgs]) time.Duration {
	return 5 * time.Minute
}

func (x *auditCheckpointWorker) Work(ctx context.Context, _ *river.Job[AuditCheckpointArgs]) error {
	s := chainStore(x.w.deps)
	if s == nil || x.w.deps.AuditKeys == nil {
		return nil
	}
	_, err := auditchain.Checkpoint(ctx, s, x.w.deps.AuditKeys, x.w.opt.Now())
	return err
}

// chainStore answers the deps' store as one that keeps audit chains, or
// nil.
func chainStore(deps Deps) toolplane.AuditChainStore {
	s, _ := deps.Store.(toolplane.AuditChainStore)
	return s
}
