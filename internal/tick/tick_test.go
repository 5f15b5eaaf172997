package tick

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	base := time.Unix(1_800_000_000, 0) // a multiple of 10 s
	for _, c := range []struct {
		now   time.Time
		every time.Duration
		want  time.Duration
	}{
		{base, 10 * time.Second, 10 * time.Second},
		{base.Add(time.Millisecond), 10 * time.Second, 10*time.Second - time.Millisecond},
		{base.Add(3 * time.Second), 2 * time.Second, time.Second},
		{base.Add(9999 * time.Millisecond), 10 * time.Second, time.Millisecond},
		{base, 0, 0},
	} {
		if got := Until(c.now, c.every); got != c.want {
			t.Errorf("Until(%s, %s) = %s, want %s", c.now.Sub(base), c.every, got, c.want)
		}
	}
}

// TestTimerFiresOnItsGrid: a 50 ms timer fires at the multiples of
// 50 ms, each time Next sets it again.
func TestTimerFiresOnItsGrid(t *testing.T) {
	const every = 50 * time.Millisecond
	tm := NewTimer(every)
	defer tm.Stop()
	var last time.Time
	for range 3 {
		at := <-tm.C()
		tm.Next()
		// Late by the scheduler's delay at most, never early.
		if off := time.Duration(at.UnixNano() % int64(every)); off > every*4/5 {
			t.Fatalf("fired %s past its grid", off)
		}
		if !last.IsZero() && at.Sub(last) < every/2 {
			t.Fatalf("fired %s after the last", at.Sub(last))
		}
		last = at
	}
}

// A timer of no period would fire again at once each time Next set it,
// and its loop would spin: NewTimer refuses it, as time.NewTicker does.
func TestNewTimerRefusesNoPeriod(t *testing.T) {
	for _, every := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewTimer(%s) did not panic", every)
				}
			}()
			NewTimer(every).Stop()
		}()
	}
}
