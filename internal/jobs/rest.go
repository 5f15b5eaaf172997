package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// A node's River client runs only while the node has job work: once it
// has worked no job, and been told of none, for Options.RestAfter, and no
// job of its queues is due, the client stops (rests), and it starts again
// when work comes. River's own loops are not configurable (its batch
// completer ticks every 50 ms, its leader election every 5 s, its
// producers poll queue settings every 2 s without a listener): a resting
// client runs none of them, and those wake-ups were most of an idle
// node's CPU. docs/idle.md lists what still wakes an idle node.
//
// Work comes, and wakes a resting client, from:
//
//   - this node's inserts (an approved call, a notification, an
//     asynchronous call, a callback, a replay, a periodic job): the
//     client starts, and its producers fetch at start, so the job is
//     worked at once;
//   - a job this node scheduled for later (an approval's expiry, a
//     notification held back), and, at rest, the earliest job due in its
//     queues (a retry, a snooze, another node's scheduled job): a timer
//     at its due time makes the due jobs available and starts the client;
//   - every sweep (clock.go), which runs without River on every node:
//     a resting node then looks for jobs available or due in its queues
//     that nobody told it of (another node's inserts that node never
//     worked, a dead node's jobs the sweep took back), so nothing waits
//     longer than a sweep period.
//
// A node killed while its client rests loses nothing: it rests only with
// no job in hand, every job is in the store, and the sweeps of the other
// nodes (or of its restart) find them.
const (
	// DefaultRestAfter is how long a node's River client goes without job
	// work before it rests.
	DefaultRestAfter = 2 * time.Second
	// restRetry is how soon a client that failed to start is tried again.
	restRetry = time.Second
)

// keeper starts and stops a node's River client as work comes and goes;
// one goroutine (run) owns the client's state.
type keeper struct {
	start, stop func(context.Context) error
	// exec reads and schedules River's jobs while the client rests.
	exec   riverdriver.Executor
	queues []string
	after  time.Duration
	log    *slog.Logger

	// wakeCh tells run of work available now; dueCh of a job due later.
	wakeCh, dueCh chan struct{}
	// active counts the jobs being worked; last is when job work was
	// last seen (Unix nanoseconds).
	active atomic.Int64
	last   atomic.Int64

	mu  sync.Mutex
	due time.Time // the earliest job due later told since the last rest

	resting atomic.Bool
	// starts counts the client's starts, the first included.
	starts atomic.Int64
	quit   context.CancelFunc
	done   chan struct{}
}

// newKeeper answers the keeper of a client on exec, for the node's
// queues; start and stop are set once the client is built.
func newKeeper(exec riverdriver.Executor, queues []string, after time.Duration, log *slog.Logger) *keeper {
	slices.Sort(queues)
	return &keeper{exec: exec, queues: queues, after: after, log: log,
		wakeCh: make(chan struct{}, 1), dueCh: make(chan struct{}, 1)}
}

// inserted tells of a job inserted into one of the node's queues, due at
// at (zero: now), committed before the call.
func (k *keeper) inserted(at time.Time) {
	if k == nil {
		return
	}
	if at.IsZero() || !at.After(time.Now()) {
		k.wake()
		return
	}
	k.dueAt(at)
}

// dueAt tells of a job due at at: a resting client starts then, after
// the jobs due are made available.
func (k *keeper) dueAt(at time.Time) {
	if at.IsZero() {
		return
	}
	k.mu.Lock()
	if k.due.IsZero() || at.Before(k.due) {
		k.due = at
	}
	k.mu.Unlock()
	signal(k.dueCh)
}

// wake tells of work available now.
func (k *keeper) wake() {
	if k == nil {
		return
	}
	k.last.Store(time.Now().UnixNano())
	signal(k.wakeCh)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // one is pending already
	}
}

// Work implements rivertype.WorkerMiddleware: it counts the jobs in hand,
// so the client never rests with one.
func (k *keeper) Work(ctx context.Context, _ *rivertype.JobRow, doInner func(context.Context) error) error {
	k.active.Add(1)
	defer func() {
		k.last.Store(time.Now().UnixNano())
		k.active.Add(-1)
	}()
	return doInner(ctx)
}

// IsMiddleware implements rivertype.Middleware.
func (k *keeper) IsMiddleware() bool { return true }

// begin starts the client and the goroutine that rests and wakes it.
func (k *keeper) begin(ctx context.Context) error {
	if err := k.start(ctx); err != nil {
		return err
	}
	k.starts.Add(1)
	k.last.Store(time.Now().UnixNano())
	loop, quit := context.WithCancel(ctx)
	k.quit, k.done = quit, make(chan struct{})
	go k.run(loop, ctx)
	return nil
}

// end stops the goroutine, leaving the client as it is (Runner.Stop stops
// it); it answers whether the client rests.
func (k *keeper) end() (resting bool) {
	if k == nil || k.quit == nil {
		return true
	}
	k.quit()
	<-k.done
	return k.resting.Load()
}

// run rests and wakes the client until loop ends. The client is started
// with base, the runner's context.
func (k *keeper) run(loop, base context.Context) {
	defer close(k.done)
	rest := time.NewTimer(k.after)
	defer rest.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	var armed time.Time // when due fires; zero: not armed
	// stopping is closed once a stop that ran out of its time (rest) has
	// finished (finishStop); nil when none is under way.
	var stopping <-chan struct{}
	arm := func(at time.Time) {
		if !at.IsZero() && (armed.IsZero() || at.Before(armed)) {
			armed = at
			// A millisecond late: River keeps times to the
			// millisecond (on SQLite, rounded), and a worker that
			// finds its job early snoozes it.
			due.Reset(max(time.Until(at), 0) + time.Millisecond)
		}
	}
	for {
		select {
		case <-loop.Done():
			return
		case <-stopping:
			// The client has stopped at last: it starts again at once,
			// since what was told meanwhile is not known, and rests
			// again when there is nothing.
			stopping = nil
			k.resting.Store(true)
			if !k.resume(base, true) {
				arm(time.Now().Add(restRetry))
				continue
			}
			rest.Reset(k.after)
		case <-k.wakeCh:
			if stopping != nil {
				continue // it starts again once stopped
			}
			if k.resting.Load() && !k.resume(base, false) {
				arm(time.Now().Add(restRetry))
				continue
			}
			rest.Reset(k.after)
		case <-k.dueCh:
			if k.resting.Load() {
				arm(k.takeDue())
			}
		case <-due.C:
			armed = time.Time{}
			if stopping != nil || !k.resting.Load() {
				continue
			}
			if !k.resume(base, true) {
				arm(time.Now().Add(restRetry))
				continue
			}
			rest.Reset(k.after)
		case <-rest.C:
			if k.resting.Load() || stopping != nil {
				continue
			}
			if wait := k.busyFor(); wait > 0 {
				rest.Reset(wait)
				continue
			}
			// What is told from here on is kept in due, and read again
			// after the rest; what was told before is in the read.
			told := k.takeDue()
			next, err := k.nextDue(loop)
			if err != nil || (!next.IsZero() && !next.After(time.Now())) {
				// Work is due now (River fetches it), or the store
				// cannot tell: the client goes on.
				k.dueAt(told)
				rest.Reset(k.after)
				continue
			}
			if err := k.rest(loop); err != nil {
				if loop.Err() != nil {
					return // the runner stops the client
				}
				// River goes on stopping a client whose Stop ran out of
				// time (a job fetched just before it, still running):
				// taken for a running one, it would be left stopped for
				// good. It is waited for off this loop.
				k.dueAt(told)
				stopping = k.finishStop()
				continue
			}
			due.Stop()
			armed = time.Time{}
			arm(next)
			// A wake-up told while the client stopped is in wakeCh, and
			// starts it again at the next turn; a job due later told
			// meanwhile is in dueCh.
		}
	}
}

// busyFor answers how long the client must still run before it may rest:
// zero once it has had no job in hand nor any work told for k.after.
func (k *keeper) busyFor() time.Duration {
	if k.active.Load() > 0 {
		return k.after
	}
	return k.after - time.Since(time.Unix(0, k.last.Load()))
}

// takeDue answers the earliest job due later told since it was last
// taken, and forgets it.
func (k *keeper) takeDue() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	at := k.due
	k.due = time.Time{}
	return at
}

// rest stops the client, which has no job in hand; it finishes and
// records what it completed.
func (k *keeper) rest(loop context.Context) error {
	// Bounded by the loop too, so a node shutting down is not held by
	// a job in hand for up to the minute.
	ctx, cancel := context.WithTimeout(loop, time.Minute)
	defer cancel()
	if err := k.stop(ctx); err != nil {
		if loop.Err() == nil {
			k.log.WarnContext(ctx, "background work not rested", "err", err)
		}
		return err
	}
	k.resting.Store(true)
	return nil
}

// finishStop waits for the client to stop after a Stop that ran out of
// its time (River lets Stop be called again, and it then waits for the
// stop under way); the channel is closed once it has, or once waiting
// failed, which leaves the client to be started again.
func (k *keeper) finishStop() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := k.stop(context.Background()); err != nil {
			k.log.Warn("background work's stop not waited for", "err", err)
		}
	}()
	return done
}

// resume starts the resting client; with schedule, it first makes the
// jobs due by now available, so the producers' first fetch finds them
// (River's scheduler runs on its leader only, every 5 s).
func (k *keeper) resume(ctx context.Context, schedule bool) bool {
	if schedule {
		if _, err := k.exec.JobSchedule(ctx, &riverdriver.JobScheduleParams{Max: sweepBatch}); err != nil && ctx.Err() == nil {
			k.log.WarnContext(ctx, "due jobs not made available; River's scheduler will", "err", err)
		}
	}
	if err := k.start(ctx); err != nil {
		if ctx.Err() == nil {
			k.log.WarnContext(ctx, "background work not started again; trying again", "err", err)
		}
		return false
	}
	k.starts.Add(1)
	k.last.Store(time.Now().UnixNano())
	k.resting.Store(false)
	return true
}

// check looks, while the client rests, for a job of the node's queues
// available or due now, and starts the client for it; a job due later
// sets the timer. It is the sweep's: what nobody told this node of waits
// at most a sweep period.
func (k *keeper) check(ctx context.Context) error {
	if k == nil || !k.resting.Load() {
		return nil
	}
	next, err := k.nextDue(ctx)
	if err != nil {
		return err
	}
	if next.IsZero() {
		return nil
	}
	k.dueAt(next)
	return nil
}

// nextDue answers when the earliest job of the node's queues waiting to
// run is due (available, scheduled or retryable), or zero when none is.
func (k *keeper) nextDue(ctx context.Context) (time.Time, error) {
	quoted := make([]string, len(k.queues))
	for i, q := range k.queues {
		quoted[i] = "'" + strings.ReplaceAll(q, "'", "''") + "'"
	}
	jobs, err := k.exec.JobList(ctx, &riverdriver.JobListParams{
		Max:           1,
		NamedArgs:     map[string]any{},
		WhereClause:   "state IN ('available', 'retryable', 'scheduled') AND queue IN (" + strings.Join(quoted, ", ") + ")",
		OrderByClause: "scheduled_at",
	})
	if err != nil {
		if ctx.Err() == nil {
			k.log.WarnContext(ctx, "jobs due not read", "err", err)
		}
		return time.Time{}, fmt.Errorf("next job due: %w", err)
	}
	if len(jobs) == 0 {
		return time.Time{}, nil
	}
	return jobs[0].ScheduledAt, nil
}

var _ rivertype.WorkerMiddleware = (*keeper)(nil)

// queueNames answers the names of queues.
func queueNames(queues map[string]river.QueueConfig) []string {
	names := make([]string, 0, len(queues))
	for q := range queues {
		names = append(names, q)
	}
	return names
}

// riverLog hands River's records to its handler with Info lowered to
// Debug: a resting client starts and stops (and gains and gives up its
// lead) every few minutes, which is no news. Warnings and errors stay.
type riverLog struct{ slog.Handler }

func (h riverLog) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, riverLevel(l))
}

func (h riverLog) Handle(ctx context.Context, r slog.Record) error {
	r.Level = riverLevel(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h riverLog) WithAttrs(as []slog.Attr) slog.Handler { return riverLog{h.Handler.WithAttrs(as)} }
func (h riverLog) WithGroup(name string) slog.Handler    { return riverLog{h.Handler.WithGroup(name)} }

func riverLevel(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
