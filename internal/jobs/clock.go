package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/tick"
)

// The periodic work runs on a node-owned clock, not River's leader: a
// resting River client (see rest.go) runs no leader, and one timer per
// period costs an idle node less than River's leader loop.
//
//   - The sweep (SweepArgs' work: the leases, the approved calls, and
//     where configured the notifications, the provider jobs and the
//     asynchronous calls) runs on every node, every Options.SweepEvery,
//     outside River: every sweep is safe to repeat and to run on two
//     nodes at once (each change is conditional, each job it enqueues
//     unique), and a node's own sweep takes a dead node's work up within
//     the node's dead-after and a sweep period, without waiting for a
//     leader. A resting node then looks for jobs nobody told it of
//     (keeper.check).
//   - Every other periodic job is enqueued by every node at the start of
//     each of its periods (and once at start), unique by the period
//     (its args' Period), so one node of the deployment runs it per
//     period, as a River job, retried on a failure. A job that can
//     tell it has nothing to do (periodic.due: no purge pending, no
//     settled window with a call, no audit chain moved past its newest
//     checkpoint) is not enqueued for that period, so an idle node's
//     River client stays at rest: each start costs River's loops for a
//     few seconds, and on PostgreSQL a listener connection.

// periodic is one job enqueued every period.
type periodic struct {
	id    string
	every time.Duration
	args  func(period int64) river.JobArgs
	// due, when set, answers whether the job has work now; it is asked
	// at the start of each period, and the job is enqueued when it
	// answers true or fails (the job then finds the work, or the
	// failure, itself).
	due func(ctx context.Context) (bool, error)
}

// periodicJobs answers the jobs enqueued every period; a job whose
// dependency is not configured is left out.
func periodicJobs(deps Deps, opt Options) []periodic {
	table := []struct {
		periodic
		on bool
	}{
		{periodic{"retention", time.Hour, func(p int64) river.JobArgs { return RetentionArgs{Period: p} }, nil}, true},
		{periodic{"sunset", time.Hour, func(p int64) river.JobArgs { return SunsetArgs{Period: p} }, nil}, deps.Sunset != nil},
		{periodic{"audit_checkpoint", opt.AuditCheckpointEvery, func(p int64) river.JobArgs { return AuditCheckpointArgs{Period: p} },
			func(ctx context.Context) (bool, error) { return auditchain.Moved(ctx, chainStore(deps)) }},
			deps.AuditKeys != nil && chainStore(deps) != nil},
		{periodic{"audit_retention", opt.AuditRetentionEvery, func(p int64) river.JobArgs { return AuditRetentionArgs{Period: p} }, nil},
			opt.AuditRetention > 0 && deps.AuditKeys != nil && chainStore(deps) != nil},
		{periodic{"anomaly_step", anomalyEvery(deps.Anomalies), func(p int64) river.JobArgs { return AnomalyStepArgs{Period: p} },
			func(ctx context.Context) (bool, error) { return deps.Anomalies.Pending(ctx) }}, deps.Anomalies != nil},
		{periodic{"audit_purges", opt.AuditPurgesEvery, func(p int64) river.JobArgs { return AuditPurgesArgs{Period: p} },
			func(ctx context.Context) (bool, error) { return deps.AuditPurges.Pending(ctx) }}, deps.AuditPurges != nil},
	}
	var out []periodic
	for _, p := range table {
		if p.on {
			out = append(out, p.periodic)
		}
	}
	return out
}

// sweeps runs the sweep every period until ctx ends, the first at once,
// the others on the node's grid (internal/tick), with its heartbeat and
// the change feed's keep-alives.
func (r *Runner[TTx]) sweeps(ctx context.Context) {
	t := tick.NewTimer(r.w.opt.SweepEvery)
	defer t.Stop()
	for {
		r.sweepOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		t.Next()
	}
}

// sweepOnce runs one sweep, bounded as a job was, and then, while the
// client rests, looks for the jobs nobody told this node of.
func (r *Runner[TTx]) sweepOnce(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	err := errors.Join(r.w.sweep(sctx), r.k.check(sctx))
	if err != nil && ctx.Err() == nil {
		r.w.opt.Logger.WarnContext(ctx, "sweep failed; the next period runs it again", "err", err)
	}
}

// enqueueEvery enqueues p's job at the start of each of its periods until
// ctx ends, and at once for the period under way.
func (r *Runner[TTx]) enqueueEvery(ctx context.Context, p periodic) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		period := now.Truncate(p.every)
		if err := r.enqueuePeriod(ctx, p, period); err != nil && ctx.Err() == nil {
			r.w.opt.Logger.WarnContext(ctx, "periodic job not enqueued; the next period enqueues it", "job", p.id, "err", err)
		}
		// The next period's start, a little after, so the clock that
		// fires never reads the period before.
		t.Reset(period.Add(p.every).Sub(now) + min(p.every/100, 50*time.Millisecond))
	}
}

// enqueuePeriod enqueues p's job for the period starting at period,
// unless a node did already or the job has nothing to do.
func (r *Runner[TTx]) enqueuePeriod(ctx context.Context, p periodic, period time.Time) error {
	if p.due != nil {
		due, err := p.due(ctx)
		if err == nil && !due {
			return nil
		}
	}
	res, err := r.jobs.Insert(ctx, p.args(period.UnixMicro()), &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", p.id, err)
	}
	r.w.enqueued(res, time.Time{})
	return nil
}
