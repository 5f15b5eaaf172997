// Package tick puts a node's periodic loops on one grid of wall-clock
// time: a loop of period p wakes at the multiples of p since the Unix
// epoch, so loops whose periods divide one another (the heartbeat's 2 s,
// the sweep's and the change feed's keep-alives' 10 s, the polls' 30 s)
// wake an idle process together, once, rather than each at its own
// instant. An idle process's cost is mostly its wake-ups: each wakes the
// runtime's threads, whatever little the loop then does (issue 35).
package tick

import "time"

// Until answers how long from now until the next multiple of every since
// the Unix epoch: every at most, and every itself when now is on the
// grid. A period of zero or less answers itself.
func Until(now time.Time, every time.Duration) time.Duration {
	if every <= 0 {
		return every
	}
	return every - time.Duration(now.UnixNano()%int64(every))
}

// Timer is a timer that fires on every's grid: at the next multiple of
// every, then, each time Next is called, at the one after.
type Timer struct {
	every time.Duration
	t     *time.Timer
}

// NewTimer answers a Timer of period every, first firing at the next
// multiple of every. It panics when every is not positive, as
// time.NewTicker does: such a timer would fire again at once each time,
// and a loop on it would spin.
func NewTimer(every time.Duration) *Timer {
	if every <= 0 {
		panic("tick: non-positive period for NewTimer")
	}
	return &Timer{every: every, t: time.NewTimer(Until(time.Now(), every))}
}

// C is the channel the timer fires on.
func (t *Timer) C() <-chan time.Time { return t.t.C }

// Next sets the timer to fire at the next multiple of its period, after
// it fired.
func (t *Timer) Next() { t.t.Reset(Until(time.Now(), t.every)) }

// Stop stops the timer.
func (t *Timer) Stop() { t.t.Stop() }
