package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolplane/toolplane/audit"
)

// AuditPurges finishes the purges of the audit trail that were confirmed
// and whose drop did not (audit.Purges): a drop that failed, or a node
// stopped between the confirmation and the drop.
type AuditPurges interface {
	FinishConfirmed(ctx context.Context) ([]audit.PurgeResult, error)
	// Pending answers whether FinishConfirmed has a purge to finish now:
	// without one the period's job is not enqueued, and an idle node's
	// River client is not started for it (see clock.go).
	Pending(ctx context.Context) (bool, error)
}

// AuditPurgesArgs: finish every organization's confirmed purge whose drop
// is not done (audit.Purges.FinishConfirmed).
type AuditPurgesArgs struct {
	// Period is the start of the period the job runs for (Unix
	// microseconds): with it the job is unique per period across the
	// nodes (see clock.go). Zero in a job an earlier version enqueued.
	Period int64 `json:"period,omitempty"`
}

// Kind names the job for River.
func (AuditPurgesArgs) Kind() string { return "toolplane_audit_purges" }

// InsertOpts keeps one pass live at a time within a period: a drop may
// outlast the minute between passes, and a second pass beside it would
// only race it for the same range. Across periods (and nodes) two passes
// may still meet; the store drops and records each range once
// (toolplane.AuditChainStore's DropAudit), so the rule does not rest on
// this.
func (AuditPurgesArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}}
}

type auditPurgesWorker struct {
	river.WorkerDefaults[AuditPurgesArgs]
	w *work
}

// Timeout bounds one pass; what it did not reach, the next pass does
// (each drop is its own transaction, and a purge is completed once).
func (x *auditPurgesWorker) Timeout(*river.Job[AuditPurgesArgs]) time.Duration {
	return 30 * time.Minute
}

func (x *auditPurgesWorker) Work(ctx context.Context, _ *river.Job[AuditPurgesArgs]) error {
	if x.w.deps.AuditPurges == nil {
		return nil
	}
	done, err := x.w.deps.AuditPurges.FinishConfirmed(ctx)
	for _, r := range done {
		x.w.opt.Logger.Info("audit purge finished", "organization", r.Purge.OrganizationID, "purge", r.Purge.ID,
			"ranges", len(r.Drops), "confirmed_by", r.Purge.ConfirmedBy)
	}
	return err
}
