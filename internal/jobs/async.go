package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
)

// The queues of asynchronous calls and of their callbacks.
const (
	asyncQueue    = "async"
	callbackQueue = "callbacks"
)

// AsyncRunArgs: run an accepted asynchronous call.
type AsyncRunArgs struct {
	Org string `json:"org" river:"unique"`
	ID  string `json:"id" river:"unique"`
}

// Kind implements river.JobArgs.
func (AsyncRunArgs) Kind() string { return "toolplane_async_run" }

// AsyncCallbackArgs: post an ended asynchronous call's result to its
// callback URL.
type AsyncCallbackArgs struct {
	Org string `json:"org" river:"unique"`
	ID  string `json:"id" river:"unique"`
}

// Kind implements river.JobArgs.
func (AsyncCallbackArgs) Kind() string { return "toolplane_async_callback" }

// SweepAsyncArgs: hand out again the asynchronous calls and callbacks
// whose hand-off a node lost between a commit and its enqueueing.
type SweepAsyncArgs struct{}

// Kind implements river.JobArgs.
func (SweepAsyncArgs) Kind() string { return "toolplane_sweep_async" }

// liveStates make a job unique while it may still run: a second one is
// enqueued only once the first ended, which is what lets the sweep enqueue
// again a call whose job completed without ending it.
var liveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// defaultAsyncStale is how long a live call or a due callback goes
// untouched before the sweep hands it out again (Options.AsyncStaleAfter);
// a job that exists for it makes the hand-off a no-op (the jobs are unique
// while live).
const defaultAsyncStale = time.Minute

type asyncRunWorker struct {
	river.WorkerDefaults[AsyncRunArgs]
	w *work
}

// Timeout is none: the invoker bounds the call by its tool's timeout (an
// asynchronous tool's may be hours), and a run taken back from a dead node
// goes through the journal again.
func (x *asyncRunWorker) Timeout(*river.Job[AsyncRunArgs]) time.Duration { return -1 }

func (x *asyncRunWorker) Work(ctx context.Context, job *river.Job[AsyncRunArgs]) error {
	err := x.w.deps.Async.Run(ctx, job.Args.Org, job.Args.ID, job.Attempt >= job.MaxAttempts)
	var again *async.Again
	if errors.As(err, &again) {
		return river.JobSnooze(again.After)
	}
	return err
}

type asyncCallbackWorker struct {
	river.WorkerDefaults[AsyncCallbackArgs]
	w *work
}

// Timeout bounds one delivery: the service's own attempt timeout, plus
// signing and recording.
func (x *asyncCallbackWorker) Timeout(*river.Job[AsyncCallbackArgs]) time.Duration { return jobTimeout }

// NextRetry waits CallbackBackoff after the first failure, doubling after
// each, at most an hour.
func (x *asyncCallbackWorker) NextRetry(job *river.Job[AsyncCallbackArgs]) time.Time {
	return x.w.opt.Now().Add(x.backoff(job.Attempt))
}

// backoff is the wait after failed attempt n.
func (x *asyncCallbackWorker) backoff(n int) time.Duration {
	return min(x.w.opt.CallbackBackoff<<min(max(n-1, 0), 20), time.Hour)
}

// Work makes one attempt; the service records a failed one on the call,
// with when NextRetry will try again.
func (x *asyncCallbackWorker) Work(ctx context.Context, job *river.Job[AsyncCallbackArgs]) error {
	return x.w.deps.Async.Deliver(ctx, job.Args.Org, job.Args.ID,
		async.Attempt{N: job.Attempt, Last: job.Attempt >= job.MaxAttempts, Retry: x.backoff(job.Attempt)})
}

type sweepAsyncWorker struct {
	river.WorkerDefaults[SweepAsyncArgs]
	w *work
}

func (x *sweepAsyncWorker) Work(ctx context.Context, _ *river.Job[SweepAsyncArgs]) error {
	cs, err := x.w.deps.Async.Stale(ctx, x.w.opt.Now().Add(-x.w.opt.AsyncStaleAfter), sweepBatch)
	if err != nil {
		return err
	}
	for i := range cs {
		if err := x.w.deps.Async.Reschedule(ctx, &cs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Accepted enqueues the run of an accepted asynchronous call
// (async.Scheduler).
func (r *Runner[TTx]) Accepted(ctx context.Context, c *toolplane.AsyncCall) error {
	return r.w.asyncRun(ctx, c)
}

// Ended enqueues the delivery of an ended call's callback
// (async.Scheduler).
func (r *Runner[TTx]) Ended(ctx context.Context, c *toolplane.AsyncCall) error {
	return r.w.asyncCallback(ctx, c)
}
