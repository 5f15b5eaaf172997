package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolplane/toolplane"
)

// ProviderJobs is what the provider jobs' background work acts through
// (providerjob.Service): the settlement of one job, the expiry of one, and
// the sweeps' reads across organizations.
type ProviderJobs interface {
	// Settle counts the job's cost once; an error is retried.
	Settle(ctx context.Context, org, jobID string) (bool, error)
	// Expire ends a job past its deadline that no vendor ended.
	Expire(ctx context.Context, j *toolplane.ProviderJob) (bool, error)
	// Unsettled answers jobs their vendor ended whose cost is not
	// counted, across organizations.
	Unsettled(ctx context.Context, limit int) ([]toolplane.ProviderJob, error)
	// Overdue answers unfinished jobs past their deadline at now, across
	// organizations.
	Overdue(ctx context.Context, now time.Time, limit int) ([]toolplane.ProviderJob, error)
}

// SettleProviderJobArgs: count a provider job's cost, once. Unique by the
// job while it waits or runs, and once it completed: the settlement is
// idempotent anyway (the store stamps the usage row once), so uniqueness
// only saves work.
type SettleProviderJobArgs struct {
	Org string `json:"org"`
	ID  string `json:"id"`
}

// Kind implements river.JobArgs.
func (SettleProviderJobArgs) Kind() string { return "toolplane_settle_provider_job" }

type settleWorker struct {
	river.WorkerDefaults[SettleProviderJobArgs]
	w *work
}

// Work settles the job. A meter failure is an error, so River retries it
// (SettleAttempts in all); once given up the job stays unsettled, listed
// so, and the provider jobs sweep enqueues it again.
func (x *settleWorker) Work(ctx context.Context, job *river.Job[SettleProviderJobArgs]) error {
	_, err := x.w.deps.ProviderJobs.Settle(ctx, job.Args.Org, job.Args.ID)
	if errors.Is(err, toolplane.ErrNotFound) {
		return river.JobCancel(err) // deleted with its run: nothing to count
	}
	return err
}

// SweepProviderJobsArgs: enqueue the settlement of every job ended and not
// settled (a node lost between storing a callback and enqueueing, a
// settlement given up), and expire the jobs past their deadline.
type SweepProviderJobsArgs struct{}

// Kind implements river.JobArgs.
func (SweepProviderJobsArgs) Kind() string { return "toolplane_sweep_provider_jobs" }

type sweepProviderJobsWorker struct {
	river.WorkerDefaults[SweepProviderJobsArgs]
	w *work
}

func (x *sweepProviderJobsWorker) Work(ctx context.Context, _ *river.Job[SweepProviderJobsArgs]) error {
	pj := x.w.deps.ProviderJobs
	overdue, err := pj.Overdue(ctx, x.w.opt.Now(), sweepBatch)
	if err != nil {
		return err
	}
	for i := range overdue {
		if _, err := pj.Expire(ctx, &overdue[i]); err != nil {
			return err
		}
	}
	unsettled, err := pj.Unsettled(ctx, sweepBatch)
	if err != nil {
		return err
	}
	for _, j := range unsettled {
		if err := x.w.settle(ctx, j.OrganizationID, j.ID); err != nil {
			return err
		}
	}
	return nil
}

// EnqueueSettlement asks for the settlement of the organization's job
// (providerjob.Settler).
func (r *Runner[TTx]) EnqueueSettlement(ctx context.Context, org, jobID string) error {
	if r.w.settle == nil {
		return errors.New("jobs: no provider jobs configured")
	}
	return r.w.settle(ctx, org, jobID)
}

// enqueueSettlementThrough gives w the way it enqueues a settlement.
func enqueueSettlementThrough[TTx any](w *work, client *guarded[TTx]) {
	if w.deps.ProviderJobs == nil {
		return
	}
	w.settle = func(ctx context.Context, org, id string) error {
		res, err := client.Insert(ctx, SettleProviderJobArgs{Org: org, ID: id},
			&river.InsertOpts{MaxAttempts: w.opt.SettleAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}})
		if err != nil {
			return fmt.Errorf("enqueue settlement of %s: %w", id, err)
		}
		w.enqueued(res, time.Time{})
		return nil
	}
}
