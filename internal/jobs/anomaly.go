package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/anomaly"
	"github.com/toolplane/toolplane/notify"
)

// Anomalies is the anomaly triage's background work (anomaly.Service):
// folding the audit trail's windows into the baselines, one Step at a
// time, on one node of the deployment.
type Anomalies interface {
	Step(ctx context.Context) (anomaly.Report, error)
	// Window is the width of one window: the job runs at least once a
	// window.
	Window() time.Duration
	// Pending does a Step's work while the windows due hold no call,
	// and answers whether a Step is still needed: without one the period's
	// job is not enqueued, and an idle node's River client is not
	// started for it (see clock.go).
	Pending(ctx context.Context) (bool, error)
}

// anomalyEvery answers the period of the anomaly job: a window, at most a
// minute, so a window is folded in soon after it settles.
func anomalyEvery(a Anomalies) time.Duration {
	if a == nil {
		return time.Minute
	}
	return min(a.Window(), time.Minute)
}

// AnomalyStepArgs: fold the audit trail's settled windows into the
// anomaly baselines and file what deviates.
type AnomalyStepArgs struct {
	// Period is the start of the period the job runs for (Unix
	// microseconds): with it the job is unique per period across the
	// nodes (see clock.go). Zero in a job an earlier version enqueued.
	Period int64 `json:"period,omitempty"`
}

// Kind implements river.JobArgs.
func (AnomalyStepArgs) Kind() string { return "toolplane_anomaly_step" }

type anomalyWorker struct {
	river.WorkerDefaults[AnomalyStepArgs]
	w *work
}

// Timeout bounds one Step: a Step folds at most a bounded number of
// windows, each one aggregate read.
func (x *anomalyWorker) Timeout(*river.Job[AnomalyStepArgs]) time.Duration { return 5 * time.Minute }

// Work runs one Step. A failure is retried by the next period's run,
// which starts from the stored watermark, so the job itself is not
// retried.
func (x *anomalyWorker) Work(ctx context.Context, _ *river.Job[AnomalyStepArgs]) error {
	rep, err := x.w.deps.Anomalies.Step(ctx)
	if err != nil {
		x.w.opt.Logger.ErrorContext(ctx, "anomaly step failed; the next one continues", "err", err)
		return river.JobCancel(err)
	}
	if rep.Windows > 0 {
		x.w.opt.Logger.DebugContext(ctx, "anomaly windows folded", "windows", rep.Windows, "through", rep.Through,
			"filed", len(rep.Filed), "updated", rep.Updated)
	}
	return nil
}

// anomalyNotifier is a Notifier that tells of anomaly items too
// (notify.Service).
type anomalyNotifier interface {
	ForAnomaly(ctx context.Context, a *toolplane.Anomaly) ([]notify.Delivery, error)
}

// AnomalyFiled enqueues the deliveries telling that the anomaly triage
// filed item a, on its organization's default channels (the anomaly
// Service's Notice). Each delivery is a job of its own, retried and
// dead-lettered as every notification is. Without a notifier that tells
// of anomalies it does nothing.
func (r *Runner[TTx]) AnomalyFiled(ctx context.Context, a *toolplane.Anomaly) error {
	n, ok := r.w.deps.Notifier.(anomalyNotifier)
	if !ok {
		return nil
	}
	ds, err := n.ForAnomaly(ctx, a)
	if err != nil {
		return err
	}
	return r.w.notifyAll(ctx, ds)
}
