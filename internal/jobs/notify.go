package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// Notifier tells people of approvals and uncertain calls (notify.Service).
// The jobs make its deliveries durable: one job per event, subject and
// channel, retried with backoff, each attempt bounded, given up after
// NotifyAttempts, and then handed to the channel's secondary.
type Notifier interface {
	ForApproval(ctx context.Context, a *toolplane.Approval, events ...notify.Event) ([]notify.Delivery, error)
	ForClaim(ctx context.Context, c *toolplane.Claim) ([]notify.Delivery, error)
	Missed(ctx context.Context, since time.Time) ([]notify.Delivery, error)
	Send(ctx context.Context, d notify.Delivery, attempt int) error
	Dead(ctx context.Context, d notify.Delivery, attempts int, last error) (*notify.Delivery, error)
	Prune(ctx context.Context) error
}

// notifyQueue is the queue deliveries run on, with workers of their own:
// a notification does not wait behind the execution of approved calls.
const notifyQueue = "notify"

// notifyWindow is how far back the notification sweep looks. What it
// recovers is the moment between a commit and its enqueueing, and a node
// sweeps when it starts, so a node down for less than this loses nothing;
// a longer window would read every recent approval every sweep. River
// keeps a finished job (which is what makes re-enqueueing a no-op)
// longer; see completedJobRetention.
const notifyWindow = 2 * time.Hour

// NotifyArgs: deliver one event's notification on one channel. The
// delivery is the job's identity, so an event is told once per channel
// however often it is enqueued.
type NotifyArgs struct {
	notify.Delivery
}

// Kind implements river.JobArgs.
func (NotifyArgs) Kind() string { return "toolplane_notify" }

type notifyWorker struct {
	river.WorkerDefaults[NotifyArgs]
	w *work
}

// Timeout bounds one attempt: an endpoint that hangs holds a worker no
// longer than this.
func (x *notifyWorker) Timeout(*river.Job[NotifyArgs]) time.Duration { return x.w.opt.NotifyTimeout }

// NextRetry backs off exponentially from NotifyBackoff, up to ten
// minutes: River's default (attempt⁴ seconds) would leave an approver
// untold for long after a short outage ends.
func (x *notifyWorker) NextRetry(job *river.Job[NotifyArgs]) time.Time {
	d := x.w.opt.NotifyBackoff << min(job.Attempt-1, 20)
	return time.Now().Add(min(d, 10*time.Minute))
}

func (x *notifyWorker) Work(ctx context.Context, job *river.Job[NotifyArgs]) error {
	n, d := x.w.deps.Notifier, job.Args.Delivery
	err := n.Send(ctx, d, job.Attempt)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, notify.ErrGone):
		return river.JobCancel(err)
	case job.Attempt < job.MaxAttempts:
		return err
	}
	// The last attempt failed: the delivery joins the dead-letter list,
	// and the channel's secondary, if it names one, is tried.
	x.w.opt.Logger.WarnContext(ctx, "notification given up", "event", d.Event, "subject", d.Subject, "channel", d.Channel,
		"attempts", job.Attempt, "err", err)
	next, derr := n.Dead(context.WithoutCancel(ctx), d, job.Attempt, err)
	if derr != nil {
		return derr
	}
	if next != nil {
		if err := x.w.notifyOne(context.WithoutCancel(ctx), *next); err != nil {
			return err
		}
	}
	return river.JobCancel(err)
}

// SweepNotifyArgs: enqueue the notifications a node lost between a commit
// and its enqueueing, and forget used links that expired.
type SweepNotifyArgs struct{}

// Kind implements river.JobArgs.
func (SweepNotifyArgs) Kind() string { return "toolplane_sweep_notify" }

type sweepNotifyWorker struct {
	river.WorkerDefaults[SweepNotifyArgs]
	w *work
}

func (x *sweepNotifyWorker) Work(ctx context.Context, _ *river.Job[SweepNotifyArgs]) error {
	ds, err := x.w.deps.Notifier.Missed(ctx, x.w.opt.Now().Add(-notifyWindow))
	if err != nil {
		return err
	}
	for _, d := range ds {
		if err := x.w.notifyOne(ctx, d); err != nil {
			return err
		}
	}
	return x.w.deps.Notifier.Prune(ctx)
}

// notifyApproval enqueues the deliveries of approval a's events. A
// failure is logged, not answered: the approval is recorded, and the
// notification sweep enqueues what this lost.
func (w *work) notifyApproval(ctx context.Context, a *toolplane.Approval, events ...notify.Event) {
	if w.deps.Notifier == nil {
		return
	}
	ds, err := w.deps.Notifier.ForApproval(ctx, a, events...)
	if err == nil {
		err = w.notifyAll(ctx, ds)
	}
	if err != nil {
		w.opt.Logger.ErrorContext(ctx, "notifications not enqueued; the sweep will", "approval", a.ID, "err", err)
	}
}

// notifyClaim enqueues the deliveries telling that claim c went
// uncertain; a failure is logged, as notifyApproval's.
func (w *work) notifyClaim(ctx context.Context, c *toolplane.Claim) {
	if w.deps.Notifier == nil {
		return
	}
	ds, err := w.deps.Notifier.ForClaim(ctx, c)
	if err == nil {
		err = w.notifyAll(ctx, ds)
	}
	if err != nil {
		w.opt.Logger.ErrorContext(ctx, "notifications not enqueued; the sweep will", "tool", c.Tool, "run", c.RunID, "err", err)
	}
}

func (w *work) notifyAll(ctx context.Context, ds []notify.Delivery) error {
	for _, d := range ds {
		if err := w.notifyOne(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// firstEvent answers how a newly filed approval is announced.
func firstEvent(a *toolplane.Approval) notify.Event {
	if a.EscalatedFrom != "" {
		return notify.ApprovalEscalated
	}
	return notify.ApprovalFiled
}

// CallUncertain tells people that a call went uncertain (invoke.Notice).
func (r *Runner[TTx]) CallUncertain(ctx context.Context, c *toolplane.Claim) {
	r.w.notifyClaim(ctx, c)
}

// allStates makes a job unique in every state River keeps: a delivery
// given up stays given up, and a delivered one is not sent again, when
// the sweep comes by.
var allStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted, rivertype.JobStateDiscarded,
	rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled,
}
