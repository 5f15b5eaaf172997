package jobs

import (
	"context"
	"time"
)

// Rest answers whether r's River client rests, and how many times it
// started (see rest.go).
func Rest[TTx any](r *Runner[TTx]) (resting bool, starts int64) {
	if r.k == nil {
		return false, 0
	}
	return r.k.resting.Load(), r.k.starts.Load()
}

// StuckAfter answers how long a running job of kind may run on a live
// node before r's sweep takes it back, and whether it ever does; r is a
// *Runner of either driver.
func StuckAfter(r any, kind string) (time.Duration, bool) {
	return r.(interface {
		stuckAfter(string) (time.Duration, bool)
	}).stuckAfter(kind)
}

func (r *Runner[TTx]) stuckAfter(kind string) (time.Duration, bool) { return r.w.stuckAfter(kind) }

// WrapRestStop wraps how the keeper stops r's client, for a test to
// bound or delay a rest's stop.
func WrapRestStop[TTx any](r *Runner[TTx], wrap func(func(context.Context) error) func(context.Context) error) {
	r.k.stop = wrap(r.k.stop)
}
