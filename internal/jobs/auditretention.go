package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolplane/toolplane/auditchain"
)

// AuditRetentionArgs: drop every organization's audit events older than
// the retention policy (Options.AuditRetention), as whole ranges under
// signed checkpoints (auditchain.Expire).
type AuditRetentionArgs struct {
	// Period is the start of the period the job runs for (Unix
	// microseconds): with it the job is unique per period across the
	// nodes (see clock.go). Zero in a job an earlier version enqueued.
	Period int64 `json:"period,omitempty"`
}

// Kind names the job for River.
func (AuditRetentionArgs) Kind() string { return "toolplane_audit_retention" }

type auditRetentionWorker struct {
	river.WorkerDefaults[AuditRetentionArgs]
	w *work
}

// Timeout bounds one pass; what it did not reach, the next pass does
// (each drop is its own transaction).
func (x *auditRetentionWorker) Timeout(*river.Job[AuditRetentionArgs]) time.Duration {
	return 30 * time.Minute
}

func (x *auditRetentionWorker) Work(ctx context.Context, _ *river.Job[AuditRetentionArgs]) error {
	s := chainStore(x.w.deps)
	keep := x.w.opt.AuditRetention
	if s == nil || x.w.deps.AuditKeys == nil || keep <= 0 {
		return nil
	}
	now := x.w.opt.Now()
	drops, err := auditchain.Expire(ctx, s, x.w.deps.AuditKeys, now.Add(-keep), now)
	for _, d := range drops {
		x.w.opt.Logger.Info("audit retention dropped a range", "organization", d.OrganizationID,
			"from", d.From, "through", d.Through, "deleted", d.Deleted, "checkpoint_key", d.CheckpointKey)
	}
	return err
}
