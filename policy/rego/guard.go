package rego

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/toolplane/toolplane/policy"
)

// DefaultMemory is what an evaluation, or one of a bundle's tests, may
// allocate when Engine.Memory is zero. A rule can build values far larger
// than its input (a range of two billion numbers, text doubled forty
// times), and OPA bounds neither; its evaluation, and its built-ins that
// build large values, stop when cancelled, so a watch that cancels the
// evaluation once it has allocated this much bounds what it holds.
const DefaultMemory = 64 << 20

// watchTick is how often a watch reads the allocations: what an
// evaluation allocates past the bound before it is stopped is what it
// allocates in one tick, and an evaluation shorter than a tick is never
// read.
const watchTick = time.Millisecond

// errMemory is the cause of an evaluation stopped by its memory bound.
var errMemory = errors.New("allocated past its memory bound")

// allocs is the runtime's count of bytes allocated since the process
// began: reading it takes well under a microsecond and stops nothing.
const allocs = "/gc/heap/allocs:bytes"

func allocated() uint64 {
	s := []metrics.Sample{{Name: allocs}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watch cancels a context, with cause errMemory, once the process has
// allocated more than limit bytes since the watch began (or was last
// restarted). Go cannot count one goroutine's allocations, so the count
// is the process's: on a busy node another request's allocations count
// too, which can only stop an evaluation early, a fault that never
// allows a call.
type watch struct {
	limit  uint64
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	start uint64
	// counting is set once start holds the count the watch measures from.
	counting bool
	timer    *time.Timer
	stopped  bool
}

// watchMemory answers ctx under a watch of limit bytes, which counts from
// when it is armed; the caller stops the watch when the evaluation ends.
func watchMemory(ctx context.Context, limit uint64) (context.Context, *watch) {
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, &watch{limit: limit, cancel: cancel}
}

// arm starts the watch. The count begins at its first tick, not here:
// most decisions end within a tick and never read the runtime's
// allocations (a read takes a lock every decision would wait on), at the
// cost of one more tick of allocations before a runaway one is stopped.
func (w *watch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.timer != nil {
		return
	}
	w.timer = time.AfterFunc(watchTick, w.check)
}

func (w *watch) check() {
	now := allocated()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if !w.counting {
		w.start, w.counting = now, true
		w.timer.Reset(watchTick)
		return
	}
	if now-w.start > w.limit {
		w.cancel(fmt.Errorf("%w (%d MiB)", errMemory, w.limit>>20))
		return
	}
	w.timer.Reset(watchTick)
}

// restart counts the allocations from now: one of a bundle's tests has
// ended and the next begins.
func (w *watch) restart() {
	now := allocated()
	w.mu.Lock()
	w.start, w.counting = now, true
	w.mu.Unlock()
}

// stop ends the watch and releases its context.
func (w *watch) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.cancel(nil)
}

// stoppedBy answers the fault of an evaluation whose context ended: its
// memory bound, its time budget (both policy.ErrBudget), or the caller's
// cancellation.
func stoppedBy(ctx context.Context) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errMemory):
		return fmt.Errorf("rego: %w: %w", policy.ErrBudget, cause)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("rego: %w: %w", policy.ErrBudget, cause)
	case cause == nil:
		cause = context.Canceled
	}
	return fmt.Errorf("rego: %w", cause)
}
