package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/notify"
)

// work is what every worker acts through.
type work struct {
	deps     Deps
	opt      Options
	enqueue  func(context.Context, *toolplane.Approval) error
	expireAt func(context.Context, *toolplane.Approval) error
	replay   func(context.Context, *toolplane.Claim) error
	// exec reads and rescues River's jobs directly (rescueLost).
	exec riverdriver.Executor
	// wake completes River's insert notifications (nil without them).
	wake *trailingWake
	// rest starts the resting River client when work comes (nil when it
	// never rests).
	rest *keeper
	// notifyOne enqueues one delivery, unique by its identity.
	notifyOne func(context.Context, notify.Delivery) error
	// settle enqueues a provider job's settlement, unique by the job.
	settle func(ctx context.Context, org, jobID string) error
	// asyncRun and asyncCallback enqueue an asynchronous call's run and
	// its callback's delivery, each unique while live.
	asyncRun, asyncCallback func(context.Context, *toolplane.AsyncCall) error
	// timeouts are each registered kind's own timeout (0: the client's,
	// negative: none), which the sweep judges a running job by, as
	// River's rescuer does (stuckAfter).
	timeouts map[string]time.Duration
}

// addWorker registers wk with workers and notes its kind's timeout for
// the sweep (work.timeouts). Every worker here answers its timeout without
// reading the job, so the zero job is asked.
func addWorker[T river.JobArgs](workers *river.Workers, w *work, wk river.Worker[T]) {
	river.AddWorker(workers, wk)
	var args T
	w.timeouts[args.Kind()] = wk.Timeout(&river.Job[T]{Args: args})
}

// enqueued tells of a job this node inserted, due at at (zero: now):
// its queue is woken on every node (PostgreSQL) and this node's client
// starts if it rests. A job the insert found already there (unique) is
// that inserter's to tell of; the sweeps find it otherwise.
func (w *work) enqueued(res *rivertype.JobInsertResult, at time.Time) {
	if res == nil || res.UniqueSkippedAsDuplicate {
		return
	}
	if at.IsZero() || !at.After(time.Now()) {
		w.wake.inserted(res.Job.Queue)
	}
	w.rest.inserted(at)
}

// sweepBatch bounds one read of a sweep.
const sweepBatch = 500

// approvedWindow is how far back the approved sweep looks. River keeps a
// completed job (which is what makes re-enqueueing a no-op) for longer than
// this; see completedJobRetention.
const approvedWindow = 48 * time.Hour

// completedJobRetention outlasts approvedWindow, so the sweep never
// re-enqueues an execution River has already forgotten it ran.
const completedJobRetention = 72 * time.Hour

// ExpireApprovalArgs: apply an approval's default at its expiry. At (unix
// microseconds) is part of the job's identity, so an approval whose expiry
// moves gets a job for its new time.
type ExpireApprovalArgs struct {
	Org string `json:"org"`
	ID  string `json:"id"`
	At  int64  `json:"at"`
}

// Kind implements river.JobArgs.
func (ExpireApprovalArgs) Kind() string { return "toolplane_expire_approval" }

type expireWorker struct {
	river.WorkerDefaults[ExpireApprovalArgs]
	w *work
}

func (x *expireWorker) Work(ctx context.Context, job *river.Job[ExpireApprovalArgs]) error {
	a, err := x.w.deps.Approvals.Find(ctx, job.Args.Org, job.Args.ID)
	if errors.Is(err, toolplane.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("approval %s: %w", job.Args.ID, err))
	}
	if err != nil {
		return err
	}
	escalating := a.Status == toolplane.ApprovalExpired && a.DefaultOnTimeout == toolplane.OnTimeoutEscalate
	if a.Status != toolplane.ApprovalPending && !escalating {
		return nil // answered in time, or denied on expiry already
	}
	if wait := a.ExpiresAt.Sub(x.w.opt.Now()); wait > 0 && !escalating {
		return river.JobSnooze(wait) // the clock of this node is behind the filer's
	}
	// An approval already expired with escalate is a retry of an
	// escalation that failed half way: Escalate finishes the same one.
	if group, ttl, ok := x.w.deps.Invoker.NextApprover(a); ok {
		next, err := x.w.deps.Approvals.Escalate(ctx, a, group, ttl)
		if err != nil {
			return err
		}
		// Escalate stores the approval_escalated event with the change.
		if err := x.w.expireAt(ctx, next); err != nil {
			return err
		}
		x.w.notifyApproval(ctx, next, notify.ApprovalEscalated, notify.ApprovalExpiring)
		// The first group hears that its approval expired and went on to
		// the next, as the sweep would tell it.
		if old, err := x.w.deps.Approvals.Find(ctx, a.OrganizationID, a.ID); err == nil {
			x.w.notifyApproval(ctx, old, notify.ApprovalDecided)
		}
		return nil
	}
	// Expire stores the approval_expired event with the change.
	expired, err := x.w.deps.Approvals.Expire(ctx, a)
	if err != nil {
		return err
	}
	if expired {
		x.w.notifyApproval(ctx, a, notify.ApprovalDecided)
	}
	return nil
}

// auditApproval records what became of an approval nobody answered: the
// trail from the first request to the last answer stays whole.
func (w *work) auditApproval(ctx context.Context, a *toolplane.Approval, outcome string) error {
	// One event per approval and outcome: a retried job finds it stored.
	ev := approval.Event(a, outcome, "", w.opt.Now())
	if err := w.deps.Store.AppendAudit(ctx, ev); err != nil && !errors.Is(err, toolplane.ErrExists) {
		return fmt.Errorf("audit approval %s: %w", a.ID, err)
	}
	return nil
}

// ExecuteApprovedArgs: run the call an approved approval holds.
type ExecuteApprovedArgs struct {
	Org string `json:"org"`
	ID  string `json:"id"`
}

// Kind implements river.JobArgs.
func (ExecuteApprovedArgs) Kind() string { return "toolplane_execute_approved" }

type executeWorker struct {
	river.WorkerDefaults[ExecuteApprovedArgs]
	w *work
}

// Timeout bounds one attempt (see executeTimeout).
func (x *executeWorker) Timeout(*river.Job[ExecuteApprovedArgs]) time.Duration { return executeTimeout }

func (x *executeWorker) Work(ctx context.Context, job *river.Job[ExecuteApprovedArgs]) error {
	_, err := x.w.deps.Invoker.ExecuteApproved(ctx, job.Args.Org, job.Args.ID)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, invoke.ErrInFlight):
		return river.JobSnooze(time.Second) // another worker runs it now
	case errors.Is(err, invoke.ErrNotResolved), errors.Is(err, toolplane.ErrNotFound):
		return river.JobCancel(err)
	}
	var ar *invoke.ApprovalRequired
	if errors.As(err, &ar) {
		// Policy asks again (a rule changed): the call waits on a new
		// approval, which a person answers; this job is done.
		return nil
	}
	if job.Attempt < job.MaxAttempts {
		return err // a fault: River retries with backoff
	}
	// The last attempt: a fault this persistent will not pass by itself.
	// The execution stops, and the trail says so; the call itself is
	// unchanged (its claim was released), so a person can look at the
	// fault and the caller may ask again.
	x.w.opt.Logger.ErrorContext(ctx, "approved call given up", "approval", job.Args.ID, "attempts", job.Attempt, "err", err)
	a, gerr := x.w.deps.Approvals.Find(ctx, job.Args.Org, job.Args.ID)
	if gerr != nil {
		return fmt.Errorf("approval %s: %w (after %w)", job.Args.ID, gerr, err)
	}
	if aerr := x.w.auditApproval(ctx, a, "approval_execution_failed"); aerr != nil {
		return aerr
	}
	return river.JobCancel(fmt.Errorf("given up after %d attempts: %w", job.Attempt, err))
}

// SweepApprovedArgs: schedule the execution of approved calls.
type SweepApprovedArgs struct{}

// Kind implements river.JobArgs.
func (SweepApprovedArgs) Kind() string { return "toolplane_sweep_approved" }

type sweepApprovedWorker struct {
	river.WorkerDefaults[SweepApprovedArgs]
	w *work
}

func (x *sweepApprovedWorker) Work(ctx context.Context, _ *river.Job[SweepApprovedArgs]) error {
	// An approval older than an approval's life has been executed (or
	// re-asked) long since; the window keeps the sweep cheap.
	since := x.w.opt.Now().Add(-approvedWindow)
	for {
		as, err := x.w.deps.Maint.ApprovedApprovals(ctx, since, sweepBatch)
		if err != nil {
			return err
		}
		for i := range as {
			if err := x.w.enqueue(ctx, &as[i]); err != nil {
				return err
			}
		}
		if len(as) < sweepBatch || !as[len(as)-1].ResolvedAt.After(since) {
			return nil
		}
		since = as[len(as)-1].ResolvedAt // ties re-read are enqueued once: the jobs are unique
	}
}

// SweepArgs: every sweep of a period, in one job: the leases (first, so
// an execution taken back from a dead node finds its claim decided), the
// approved calls, and, where configured, the notifications, the provider
// jobs and the asynchronous calls. Each runs whatever another failed; a
// failure retries the job, and every sweep is safe to repeat.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "toolplane_sweep" }

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	w *work
}

func (x *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error { return x.w.sweep(ctx) }

// sweep runs every sweep of a period (see SweepArgs); the node's clock
// runs it every Options.SweepEvery (clock.go).
func (w *work) sweep(ctx context.Context) error {
	errs := []error{
		w.sweepLeases(ctx),
		(&sweepApprovedWorker{w: w}).Work(ctx, nil),
	}
	if w.deps.Notifier != nil {
		errs = append(errs, (&sweepNotifyWorker{w: w}).Work(ctx, nil))
	}
	if w.deps.ProviderJobs != nil {
		errs = append(errs, (&sweepProviderJobsWorker{w: w}).Work(ctx, nil))
	}
	if w.deps.Async != nil {
		errs = append(errs, (&sweepAsyncWorker{w: w}).Work(ctx, nil))
	}
	return errors.Join(errs...)
}

// SweepLeasesArgs: settle claims whose worker died.
type SweepLeasesArgs struct{}

// Kind implements river.JobArgs.
func (SweepLeasesArgs) Kind() string { return "toolplane_sweep_leases" }

type sweepLeasesWorker struct {
	river.WorkerDefaults[SweepLeasesArgs]
	w *work
}

func (x *sweepLeasesWorker) Work(ctx context.Context, _ *river.Job[SweepLeasesArgs]) error {
	return x.w.sweepLeases(ctx)
}

// sweepLeases decides one batch of the claims whose worker was lost, then
// takes back the jobs that were running on nodes known dead. The jobs are
// taken back even when a claim could not be decided: one claim that keeps
// failing must not hold a dead node's notifications and executions past
// their bound.
func (w *work) sweepLeases(ctx context.Context) error {
	now := w.opt.Now()
	// The claims first: an execution taken back from a dead node then
	// finds its undispatched claim released, not in flight.
	settled := w.settleLostClaims(ctx, now)
	return errors.Join(settled, w.rescueLost(ctx, now))
}

// settleLostClaims decides one batch of the claims whose worker was lost.
func (w *work) settleLostClaims(ctx context.Context, now time.Time) error {
	cs, err := w.deps.Maint.ExpiredClaims(ctx, now, sweepBatch)
	if err != nil {
		return err
	}
	if w.opt.DeadAfter > 0 {
		// Claims of nodes known dead are decided now, not at the end of
		// their leases. A node is dead once its silence reaches
		// DeadAfter (toolplane.Node.Dead): its last heartbeat is at or
		// before now-DeadAfter, which is before one microsecond later,
		// the store's resolution.
		orphans, err := w.deps.Maint.OrphanedClaims(ctx, now.Add(-w.opt.DeadAfter+time.Microsecond), sweepBatch)
		if err != nil {
			return err
		}
		for _, c := range orphans {
			if w.opt.Node == "" || c.Node != w.opt.Node {
				cs = append(cs, c)
			}
		}
	}
	for i := range cs {
		if err := w.settleLost(ctx, &cs[i], now); err != nil {
			return err
		}
	}
	return nil
}

// settleLost decides a processing claim whose worker was lost (its lease
// ended, or its node is known dead), each state with its audit event in
// the same transaction as the change. A claim that changed since it was
// read (a stale version) is someone else's to decide.
func (w *work) settleLost(ctx context.Context, c *toolplane.Claim, now time.Time) error {
	if !c.Dispatched {
		// Never reached its handler: nothing happened, so the next
		// identical call runs it afresh.
		ev := journal.ClaimEvent(c, ReleasedOutcome, toolplane.SourceSweep, NotDispatchedReason, now)
		if _, err := w.deps.Store.DeleteClaimAudited(ctx, c.OrganizationID, c.Tool, c.Key, c.Version, ev); err != nil {
			return err
		}
		return nil
	}
	if w.deps.Invoker.Replayable(c.OrganizationID, c.Tool, c.Attempts) {
		// Safe to repeat, with attempts left: a worker runs it again,
		// with the same key, without waiting for the caller; that run is
		// audited as any call.
		return w.replay(ctx, c)
	}
	lost, err := journal.LoseLease(ctx, w.deps.Store, c, toolplane.SourceSweep, now)
	if err != nil && !errors.Is(err, journal.ErrLeaseLost) {
		return err
	}
	if lost != nil {
		w.notifyClaim(ctx, lost)
	}
	return nil
}

// ReleasedOutcome is the audit outcome of a claim released without its
// caller: its worker was lost before the call reached the handler.
const ReleasedOutcome = "released"

// NotDispatchedReason is why a lost worker's claim is released.
const NotDispatchedReason = "the worker holding the call was lost before the call reached its handler; nothing was done"

// RetentionArgs: remove completed journal rows past their TTL.
type RetentionArgs struct {
	// Period is the start of the period the job runs for (Unix
	// microseconds): with it the job is unique per period across the
	// nodes (see clock.go). Zero in a job an earlier version enqueued.
	Period int64 `json:"period,omitempty"`
}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "toolplane_retention" }

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	w *work
}

func (x *retentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	before := x.w.opt.Now().Add(-x.w.opt.Retention)
	for {
		n, err := x.w.deps.Maint.DeleteCompletedClaims(ctx, before, sweepBatch)
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}
	for x.w.deps.Async != nil {
		// Ended asynchronous calls are kept as long as completed claims:
		// a caller polls a result within that, or its callback got it.
		n, err := x.w.deps.Store.DeleteEndedAsyncCalls(ctx, before, sweepBatch)
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}
	for {
		n, err := x.w.deps.Maint.DeleteDeadNodes(ctx, before, sweepBatch)
		if err != nil || n < sweepBatch {
			return err
		}
	}
}

// SunsetArgs: retire deprecated versions past their sunset that nobody
// called in the trailing week; name the callers of the others.
type SunsetArgs struct {
	// Period is the start of the period the job runs for (Unix
	// microseconds): with it the job is unique per period across the
	// nodes (see clock.go). Zero in a job an earlier version enqueued.
	Period int64 `json:"period,omitempty"`
}

// Kind implements river.JobArgs.
func (SunsetArgs) Kind() string { return "toolplane_sunset" }

type sunsetWorker struct {
	river.WorkerDefaults[SunsetArgs]
	w *work
}

func (x *sunsetWorker) Work(ctx context.Context, _ *river.Job[SunsetArgs]) error {
	if x.w.deps.Sunset == nil {
		return nil
	}
	retired, blocked, err := x.w.deps.Sunset.Sunset(ctx)
	if len(retired)+len(blocked) > 0 {
		x.w.opt.Logger.InfoContext(ctx, "sunset", "retired", retired, "blocked", blocked)
	}
	return err
}

// ReplayClaimArgs: run again a call safe to replay whose worker was lost.
type ReplayClaimArgs struct {
	Org      string `json:"org"`
	Tool     string `json:"tool"`
	Key      string `json:"key"`
	Attempts int    `json:"attempts"`
}

// Kind implements river.JobArgs.
func (ReplayClaimArgs) Kind() string { return "toolplane_replay_claim" }

type replayWorker struct {
	river.WorkerDefaults[ReplayClaimArgs]
	w *work
}

// Timeout bounds one attempt (see executeTimeout).
func (x *replayWorker) Timeout(*river.Job[ReplayClaimArgs]) time.Duration { return executeTimeout }

func (x *replayWorker) Work(ctx context.Context, job *river.Job[ReplayClaimArgs]) error {
	c, err := x.w.deps.Store.GetClaim(ctx, job.Args.Org, job.Args.Tool, job.Args.Key)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil // released meanwhile: nothing to replay
	}
	if err != nil {
		return err
	}
	if c.Status != toolplane.ClaimProcessing || c.Attempts != job.Args.Attempts {
		return nil // answered, or another attempt started, since the sweep
	}
	r, err := x.w.deps.Invoker.ReplayClaim(ctx, c)
	var ar *invoke.ApprovalRequired
	switch {
	case errors.Is(err, invoke.ErrInFlight):
		return river.JobSnooze(time.Second)
	case err == nil && r.OK:
		return nil
	case err != nil && !errors.Is(err, invoke.ErrNotReplayable) && !errors.As(err, &ar):
		return err // a fault: the job is tried again
	}
	// The replay was refused (denied by the live principal, the tool
	// changed, the stored arguments invalid, a person must approve it now,
	// no longer replayable) or ran and answered an error: no worker will
	// run the lost call again, and it may have acted. Recording it as
	// uncertain, with its event, puts it before a person instead of
	// leaving it processing for every sweep to enqueue again. The write is
	// conditional on c's version, so a claim the replay itself took,
	// completed or released is left as it is.
	lost, err := journal.LoseLease(ctx, x.w.deps.Store, c, toolplane.SourceSweep, x.w.opt.Now())
	if err != nil && !errors.Is(err, journal.ErrLeaseLost) {
		return err
	}
	if lost != nil {
		x.w.notifyClaim(ctx, lost)
	}
	return nil
}
