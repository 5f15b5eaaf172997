// Package jobs runs toolplane's durable background work on River
// (riverqueue): an existing engine with durable, retried, scheduled and
// unique jobs, on PostgreSQL in production and on its SQLite driver in
// embedded mode. The rest of toolplane sees only the Scheduler interface
// in the invoke package; nothing outside this package imports River.
//
// The work:
//
//   - approval expiry: at an approval's expiry its default applies, on
//     whichever node picks the job up: deny, or escalate to the next group
//     of the tool's approval chain in a new approval that names the one it
//     replaces (and is itself scheduled to expire);
//   - execution of an approved call, without the model asking again: the
//     job calls Invoker.ExecuteApproved, and the idempotency journal makes
//     the effect happen once however often the job (or the model) runs it;
//   - a periodic sweep that schedules the execution of every approved call
//     still waiting, so a node that died between recording an approval and
//     enqueueing its execution loses nothing;
//   - lease expiry: a periodic sweep releases claims whose worker died
//     before dispatch (nothing happened), runs again, from a worker and
//     with the same key, those of tools safe to replay with attempts left,
//     and turns the rest into uncertain actions;
//   - recovery: every worker declares a timeout, and River takes back a
//     job still running past the largest one plus a margin;
//     the lease sweep takes back at once the jobs of nodes known dead (a
//     node's River client is named by its instance id, which it
//     heartbeats under), so work a killed node had started runs again
//     within the node's dead-after and a sweep period (rescue.go);
//   - retention: completed journal rows past their TTL are removed, and so
//     are node instances silent as long that hold no claim;
//   - provider jobs (see providerjobs.go): the settlement of a job's cost
//     once its vendor ended it, retried on a meter failure, and a sweep
//     that enqueues every settlement still owed and expires the jobs past
//     their deadline;
//   - notifications (see notify.go): one job per event, subject and
//     channel on a queue of its own, and a sweep that enqueues what a node
//     lost between a commit and its enqueueing;
//   - the anomaly triage (see anomaly.go): a periodic step that folds
//     the audit trail's settled windows into the baselines.
//
// The periodic work is a table (periodicJobs) on a node-owned clock
// (clock.go): the sweep runs on every node, each other entry is enqueued
// once per period across the nodes. A node's River client runs only while
// it has job work (rest.go).
//
// A River job or a node's own loop: work on the deployment's shared state
// that must get done (it acts on a call, an approval, a claim or a
// notification, or keeps the journal's size across organizations) is a
// River job here, so it happens once across the nodes, is retried until
// done, and survives the node that started it. Work a node does for
// itself is a loop the server runs beside the runner (internal/server):
// its heartbeat, reloading its caches from the store's feed (catalogue,
// upstream settings, connections), its links to upstream servers, and
// the light removal of expired rows that are refused when read anyway
// (ended browser sessions, authorizations nobody completed), which every
// node may repeat harmlessly and whose miss costs only a table's growth.
// Heartbeat is defined here, beside the lease sweep that judges nodes by
// it, but is such a loop: a node beats whether or not River is working
// its jobs.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
)

// Maintenance is what the sweeps need of a store beyond toolplane.Store:
// cross-organization maintenance reads and deletes, each bounded.
type Maintenance interface {
	// ExpiredClaims answers processing claims whose lease ended before
	// before, across organizations, oldest first.
	ExpiredClaims(ctx context.Context, before time.Time, limit int) ([]toolplane.Claim, error)
	// DeleteCompletedClaims removes completed claims last updated before
	// before, at most limit, and answers how many it removed.
	DeleteCompletedClaims(ctx context.Context, before time.Time, limit int) (int, error)
	// ApprovedApprovals answers approvals resolved approved since since,
	// across organizations, oldest first.
	ApprovedApprovals(ctx context.Context, since time.Time, limit int) ([]toolplane.Approval, error)
	// OrphanedClaims answers processing claims held by node instances
	// whose last heartbeat is before deadBefore, across organizations.
	OrphanedClaims(ctx context.Context, deadBefore time.Time, limit int) ([]toolplane.Claim, error)
	// DeleteDeadNodes removes node instances silent since before that hold
	// no processing claim, at most limit, and answers how many.
	DeleteDeadNodes(ctx context.Context, before time.Time, limit int) (int, error)
}

// DefaultRetention is how long a completed journal row, and an ended
// asynchronous call, is kept unless Options say otherwise.
const DefaultRetention = 7 * 24 * time.Hour

// Options tune the background work.
type Options struct {
	// Retention is how long a completed journal row is kept; default
	// DefaultRetention.
	Retention time.Duration
	// SweepEvery is the period of the lease and approval sweeps; default 30s.
	SweepEvery time.Duration
	// DeadAfter, when set, is how long a node may go without a heartbeat
	// before it is known dead: the lease sweep then decides the claims it
	// held without waiting for their leases. Zero judges claims by their
	// leases alone.
	DeadAfter time.Duration
	// Node is this node's instance id, the one its invoker records on the
	// claims it takes (invoke.Config.Node). The sweep never judges those
	// claims dead by the heartbeat: this node is running them, whatever
	// its heartbeat says (a long pause, a slow disk); their leases alone
	// decide them.
	Node string
	// AuditCheckpointEvery is how often the audit chains are checkpointed;
	// default 5 minutes.
	AuditCheckpointEvery time.Duration
	// AuditRetention, when positive (with AuditKeys and a store that keeps
	// audit chains), is how long audit events are kept: every
	// AuditRetentionEvery one node drops the older ones (AuditRetentionArgs).
	// Zero keeps them all.
	AuditRetention time.Duration
	// AuditRetentionEvery is how often retention runs; default an hour.
	AuditRetentionEvery time.Duration
	// AuditPurgesEvery is how often the unfinished purges are looked for
	// (Deps.AuditPurges); default a minute.
	AuditPurgesEvery time.Duration
	// Workers is how many jobs one node runs at once; default 10.
	Workers int
	// Poll is how often a node looks for due jobs when it hears nothing:
	// the fallback behind the wake-ups (see wakeups.go); default
	// DefaultPoll, or DefaultPollWithoutListener on a driver without a
	// listener (SQLite), where it bounds how late a job that was scheduled
	// for later (an approval's expiry, a retry) starts.
	Poll time.Duration
	// ExecuteAttempts is how many times the execution of an approved call
	// is tried before it is given up; default 5. River waits attempt^4
	// seconds between tries, so five span about six minutes: long enough
	// for a passing fault, short of retrying a call that can never run
	// for weeks.
	ExecuteAttempts int
	// NotifyAttempts is how many times a notification is tried on its
	// channel before it is given up (dead-lettered) and its secondary
	// channel tried; default 5. NotifyBackoff is the wait after the first
	// failure, doubling after each; default 2s. NotifyTimeout bounds one
	// attempt; default 15s. NotifyWorkers is how many deliveries one node
	// makes at once; default 5.
	NotifyAttempts int
	NotifyBackoff  time.Duration
	NotifyTimeout  time.Duration
	NotifyWorkers  int
	// NotifyPoll is how often a node looks for due notifications,
	// asynchronous calls and callbacks when it hears nothing; default
	// Poll. A new one wakes its queue at once: on SQLite River wakes the
	// inserting node's queue itself, on PostgreSQL by a notification that
	// River sends at most once per cooldown per queue, and which the
	// trailing wake-up completes (see wakeups.go), so a burst of filings
	// leaves none to the poll.
	NotifyPoll time.Duration
	// SettleAttempts is how many times a provider job's settlement is
	// tried before it is given up to the sweep; default 4 (three
	// retries, as every metered path).
	SettleAttempts int
	// AsyncAttempts is how many times the run of an asynchronous call is
	// tried when it meets a platform fault before the call ends failed;
	// default 5. Waiting for an approval or an identical call in flight
	// is not an attempt.
	AsyncAttempts int
	// AsyncWorkers is how many asynchronous calls one node runs at once;
	// default 20.
	AsyncWorkers int
	// AsyncStaleAfter is how long an asynchronous call still moving, or
	// a callback still due, goes untouched before the sweep hands it to a
	// worker again; default a minute. The jobs are unique while live, so
	// a hand-off that was not lost is a no-op: a shorter bound costs only
	// the sweep's reads, and finds a hand-off lost between a commit and
	// its enqueueing sooner.
	AsyncStaleAfter time.Duration
	// CallbackAttempts is how many times a callback is posted before it is
	// given up (expired); default 15. CallbackBackoff is the wait after
	// the first failure, doubling after each, at most an hour; default
	// 5s: fifteen attempts span about six hours.
	CallbackAttempts int
	CallbackBackoff  time.Duration
	// RestAfter is how long the node's River client goes without job
	// work before it rests (stops) until work comes (see rest.go);
	// default DefaultRestAfter, negative: it never rests.
	RestAfter time.Duration
	Logger    *slog.Logger
	Now       func() time.Time
}

// Deps are the parts of the platform the jobs act through.
type Deps struct {
	Invoker   *invoke.Invoker
	Approvals *approval.Service
	Store     toolplane.Store
	Maint     Maintenance
	// Notifier, when set, tells people of approvals and uncertain calls.
	Notifier Notifier
	// Async, when set, runs asynchronous calls and delivers their
	// callbacks.
	Async *async.Service
	// Sunset, when set, applies the sunset rule to deprecated versions
	// (retire the uncalled, block and name the callers of the others).
	Sunset Sunsetter
	// ProviderJobs, when set, settles and expires provider jobs.
	ProviderJobs ProviderJobs
	// AuditKeys, when set (with a store that keeps audit chains), signs a
	// checkpoint of every organization's audit chain that moved, every
	// AuditCheckpointEvery.
	AuditKeys *auditchain.KeySet
	// Anomalies, when set, runs the anomaly triage's periodic step.
	Anomalies Anomalies
	// AuditPurges, when set, finishes the confirmed purges of the audit
	// trail whose drop did not finish, every AuditPurgesEvery.
	AuditPurges AuditPurges
}

// Sunsetter applies the sunset rule (catalog.Service).
type Sunsetter interface {
	Sunset(ctx context.Context) (retired, blocked []string, err error)
}

// Runner is one node's River client with toolplane's workers.
type Runner[TTx any] struct {
	client *river.Client[TTx]
	// jobs is client as the node inserts through it.
	jobs *guarded[TTx]
	w    *work
	// k rests and wakes the client (nil when it never rests).
	k *keeper
	// periodic is the work of the node's clock (clock.go); stopClock ends
	// it and clock is waited for.
	periodic  []periodic
	stopClock context.CancelFunc
	clock     sync.WaitGroup
}

// Migrate applies River's own migrations through driver.
func Migrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx]) error {
	m, err := migrator(driver)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// MigrateTx applies River's own migrations in tx, which the caller commits
// or rolls back: River reads which versions are applied in tx too. Migrate
// reads them before it applies the others, each in a transaction of its
// own, so two processes migrating at once both apply the versions they
// read missing; within one transaction that holds the database's write
// lock from its start (SQLite's), a process that waited for the lock finds
// them applied. River deprecates this because some PostgreSQL migrations
// cannot share a transaction; SQLite's DDL can.
func MigrateTx[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], tx TTx) error {
	m, err := migrator(driver)
	if err != nil {
		return err
	}
	//lint:ignore SA1019 River's migrations on SQLite share a transaction (see the doc comment)
	if _, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// migrator answers River's migrator for driver, its log discarded.
func migrator[TTx any](driver riverdriver.Driver[TTx]) (*rivermigrate.Migrator[TTx], error) {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	return m, nil
}

// withDefaults answers o with every unset field given its default (see
// Options).
func (o Options) withDefaults() Options {
	orDefault(&o.Retention, DefaultRetention)
	orDefault(&o.SweepEvery, 30*time.Second)
	orDefault(&o.AuditCheckpointEvery, 5*time.Minute)
	orDefault(&o.AuditRetentionEvery, time.Hour)
	orDefault(&o.AuditPurgesEvery, time.Minute)
	orDefault(&o.Workers, 10)
	orDefault(&o.ExecuteAttempts, 5)
	orDefault(&o.NotifyAttempts, 5)
	orDefault(&o.NotifyBackoff, 2*time.Second)
	orDefault(&o.NotifyTimeout, 15*time.Second)
	orDefault(&o.NotifyWorkers, 5)
	orDefault(&o.SettleAttempts, 4)
	orDefault(&o.AsyncAttempts, 5)
	orDefault(&o.AsyncWorkers, 20)
	orDefault(&o.AsyncStaleAfter, defaultAsyncStale)
	orDefault(&o.CallbackAttempts, 15)
	orDefault(&o.CallbackBackoff, 5*time.Second)
	if o.RestAfter == 0 {
		o.RestAfter = DefaultRestAfter
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// New builds a node's runner; Start begins working jobs.
func New[TTx any](driver riverdriver.Driver[TTx], deps Deps, opt Options) (*Runner[TTx], error) {
	if deps.Invoker == nil || deps.Approvals == nil || deps.Store == nil || deps.Maint == nil {
		return nil, errors.New("jobs: invoker, approvals, store and maintenance are required")
	}
	if opt.Poll <= 0 {
		opt.Poll = DefaultPoll
		if !driver.SupportsListener() {
			opt.Poll = DefaultPollWithoutListener
		}
	}
	orDefault(&opt.NotifyPoll, opt.Poll)
	opt = opt.withDefaults()
	w := &work{deps: deps, opt: opt, timeouts: map[string]time.Duration{}}
	workers := river.NewWorkers()
	addWorker(workers, w, &expireWorker{w: w})
	addWorker(workers, w, &executeWorker{w: w})
	addWorker(workers, w, &sweepLeasesWorker{w: w})
	addWorker(workers, w, &sweepApprovedWorker{w: w})
	addWorker(workers, w, &sweepWorker{w: w})
	addWorker(workers, w, &retentionWorker{w: w})
	addWorker(workers, w, &auditCheckpointWorker{w: w})
	addWorker(workers, w, &auditRetentionWorker{w: w})
	addWorker(workers, w, &auditPurgesWorker{w: w})
	addWorker(workers, w, &replayWorker{w: w})
	addWorker(workers, w, &sunsetWorker{w: w})
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opt.Workers}}
	if deps.ProviderJobs != nil {
		addWorker(workers, w, &settleWorker{w: w})
		addWorker(workers, w, &sweepProviderJobsWorker{w: w})
	}
	if deps.Anomalies != nil {
		addWorker(workers, w, &anomalyWorker{w: w})
	}
	if deps.Notifier != nil {
		addWorker(workers, w, &notifyWorker{w: w})
		addWorker(workers, w, &sweepNotifyWorker{w: w})
		queues[notifyQueue] = river.QueueConfig{MaxWorkers: opt.NotifyWorkers, FetchPollInterval: opt.NotifyPoll,
			FetchCooldown: min(opt.NotifyPoll, 50*time.Millisecond)}
	}
	if deps.Async != nil {
		addWorker(workers, w, &asyncRunWorker{w: w})
		addWorker(workers, w, &asyncCallbackWorker{w: w})
		addWorker(workers, w, &sweepAsyncWorker{w: w})
		// A queue of their own, so a burst of long calls never holds up
		// approvals and sweeps (nor they the calls), fetched as soon as a
		// call is accepted on this node: River tells its own producer of
		// an insert, at most once per cooldown.
		queues[asyncQueue] = river.QueueConfig{MaxWorkers: opt.AsyncWorkers, FetchPollInterval: opt.NotifyPoll, FetchCooldown: time.Millisecond}
		queues[callbackQueue] = river.QueueConfig{MaxWorkers: opt.NotifyWorkers, FetchPollInterval: opt.NotifyPoll,
			FetchCooldown: min(opt.NotifyPoll, 50*time.Millisecond)}
	}
	cfg := &river.Config{
		// River names the client that takes a job in the job's
		// attempted_by: naming it by this node's instance id lets the
		// lease sweep tell a dead node's running jobs (see rescueLost).
		ID: riverID(opt.Node),
		// Every worker declares its timeout; a job still running past the
		// largest, plus a margin, is taken back and run again (River's
		// default is an hour).
		JobTimeout:                  jobTimeout,
		RescueStuckJobsAfter:        rescueAfter(opt),
		Queues:                      queues,
		Workers:                     workers,
		Logger:                      slog.New(riverLog{opt.Logger.Handler()}),
		CompletedJobRetentionPeriod: completedJobRetention,
		// A cancelled execution (one given up) is kept as long as a
		// completed one, so the approved sweep does not start it again.
		CancelledJobRetentionPeriod: completedJobRetention,
	}
	var k *keeper
	if opt.RestAfter > 0 {
		k = newKeeper(driver.GetExecutor(), queueNames(queues), opt.RestAfter, opt.Logger)
		// The keeper counts the jobs in hand: the client never rests
		// with one.
		cfg.Middleware = []rivertype.Middleware{k}
	}
	// The fetch poll is a fallback: new work wakes its queue (see
	// wakeups.go).
	cfg.FetchPollInterval = opt.Poll
	cfg.FetchCooldown = min(opt.Poll, 100*time.Millisecond)
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	w.exec = driver.GetExecutor()
	ins := &guarded[TTx]{client: client}
	if k != nil {
		k.start, k.stop = ins.start, client.Stop
		w.rest = k
	}
	w.wake = newTrailingWake(driver, cfg.FetchCooldown, func(queue string, err error) {
		opt.Logger.Warn("job insert notification not sent; the queue's poll finds the job", "queue", queue, "err", err)
	})
	enqueueThrough(w, ins)
	enqueueSettlementThrough(w, ins)
	return &Runner[TTx]{client: client, jobs: ins, w: w, k: k, periodic: periodicJobs(deps, opt)}, nil
}

// guarded is the River client as the node inserts through it: an insert
// never runs while the client starts. Without a listener (SQLite) an
// insert wakes the client's producers in process, reading a field each
// producer sets as it starts, unguarded in River; a client that rests
// (rest.go) starts again while the node inserts, where River's own use
// starts it once, before any insert.
type guarded[TTx any] struct {
	client *river.Client[TTx]
	mu     sync.RWMutex
}

// Insert inserts a job through the client (river.Client.Insert).
func (g *guarded[TTx]) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.client.Insert(ctx, args, opts)
}

// start starts the client, no insert running meanwhile.
func (g *guarded[TTx]) start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.client.Start(ctx)
}

// enqueueThrough gives w the ways it enqueues work, each through client
// and unique as its job must be.
func enqueueThrough[TTx any](w *work, client *guarded[TTx]) {
	opt := w.opt
	w.expireAt = func(ctx context.Context, a *toolplane.Approval) error {
		res, err := client.Insert(ctx, ExpireApprovalArgs{Org: a.OrganizationID, ID: a.ID, At: a.ExpiresAt.UnixMicro()},
			&river.InsertOpts{ScheduledAt: a.ExpiresAt, UniqueOpts: river.UniqueOpts{ByArgs: true}})
		if err != nil {
			return fmt.Errorf("schedule expiry of %s: %w", a.ID, err)
		}
		w.enqueued(res, a.ExpiresAt)
		return nil
	}
	w.replay = func(ctx context.Context, c *toolplane.Claim) error {
		// Unique by claim and attempt: one replay per lost attempt.
		res, err := client.Insert(ctx, ReplayClaimArgs{Org: c.OrganizationID, Tool: c.Tool, Key: c.Key, Attempts: c.Attempts},
			&river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
		if err != nil {
			return fmt.Errorf("enqueue replay of %s: %w", c.Key, err)
		}
		w.enqueued(res, time.Time{})
		return nil
	}
	w.enqueue = func(ctx context.Context, a *toolplane.Approval) error {
		// Unique in every state River keeps, cancelled and discarded
		// included: an execution that was given up stays given up when
		// the approved sweep comes by.
		res, err := client.Insert(ctx, ExecuteApprovedArgs{Org: a.OrganizationID, ID: a.ID},
			&river.InsertOpts{MaxAttempts: opt.ExecuteAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted, rivertype.JobStateDiscarded,
				rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled,
			}}})
		if err != nil {
			return fmt.Errorf("enqueue execution of %s: %w", a.ID, err)
		}
		w.enqueued(res, time.Time{})
		return nil
	}
	w.asyncRun = func(ctx context.Context, c *toolplane.AsyncCall) error {
		res, err := client.Insert(ctx, AsyncRunArgs{Org: c.OrganizationID, ID: c.ID},
			&river.InsertOpts{Queue: asyncQueue, MaxAttempts: opt.AsyncAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}})
		if err != nil {
			return fmt.Errorf("enqueue the run of %s: %w", c.ID, err)
		}
		w.enqueued(res, time.Time{})
		return nil
	}
	w.asyncCallback = func(ctx context.Context, c *toolplane.AsyncCall) error {
		res, err := client.Insert(ctx, AsyncCallbackArgs{Org: c.OrganizationID, ID: c.ID},
			&river.InsertOpts{Queue: callbackQueue, MaxAttempts: opt.CallbackAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: liveStates}})
		if err != nil {
			return fmt.Errorf("enqueue the callback of %s: %w", c.ID, err)
		}
		w.enqueued(res, time.Time{})
		return nil
	}
	w.notifyOne = func(ctx context.Context, d notify.Delivery) error {
		res, err := client.Insert(ctx, NotifyArgs{Delivery: d}, &river.InsertOpts{Queue: notifyQueue, MaxAttempts: opt.NotifyAttempts,
			ScheduledAt: d.At, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: allStates}})
		if err != nil {
			return fmt.Errorf("enqueue notification %s of %s: %w", d.Event, d.Subject, err)
		}
		w.enqueued(res, d.At)
		return nil
	}
}

// riverID answers the River client id of the node instance node: the
// instance id itself, which River allows up to 100 bytes. A longer one
// (a node name near that length) leaves River to choose; that node's jobs
// are then taken back by River's rescuer alone.
func riverID(node string) string {
	if len(node) > 100 {
		return ""
	}
	return node
}

// Start begins working jobs on this node, and its clock (clock.go): the
// sweeps, the first at once, and the periodic jobs.
func (r *Runner[TTx]) Start(ctx context.Context) error {
	var err error
	if r.k != nil {
		err = r.k.begin(ctx)
	} else {
		err = r.jobs.start(ctx)
	}
	if err != nil {
		return err
	}
	clock, stop := context.WithCancel(ctx)
	r.stopClock = stop
	r.clock.Go(func() { r.sweeps(clock) })
	for _, p := range r.periodic {
		r.clock.Go(func() { r.enqueueEvery(clock, p) })
	}
	return nil
}

// Stop ends the clock, finishes the jobs in hand and stops.
func (r *Runner[TTx]) Stop(ctx context.Context) error {
	if r.stopClock != nil {
		r.stopClock()
	}
	r.clock.Wait()
	r.k.end()
	r.w.wake.stop()
	return r.client.Stop(ctx)
}

// ApprovalFiled schedules the approval's expiry (invoke.Scheduler).
func (r *Runner[TTx]) ApprovalFiled(ctx context.Context, a *toolplane.Approval) error {
	if err := r.w.expireAt(ctx, a); err != nil {
		return err
	}
	r.w.notifyApproval(ctx, a, firstEvent(a), notify.ApprovalExpiring)
	return nil
}

// ApprovalResolved enqueues the execution of an approved call
// (invoke.Scheduler). A rejection needs no job: the next identical call
// reads it.
func (r *Runner[TTx]) ApprovalResolved(ctx context.Context, a *toolplane.Approval) error {
	r.w.notifyApproval(ctx, a, notify.ApprovalDecided)
	if a.Status != toolplane.ApprovalApproved {
		return nil
	}
	return r.w.enqueue(ctx, a)
}
