package allocbudget

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that notes failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
	logs   []string
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

var sink []byte

// TestAllocBudgetFailsOverItsFigure shows Check a budget passing at its figure and failing one below.
func TestAllocBudgetFailsOverItsFigure(t *testing.T) {
	Skip(t)
	alloc := func() { sink = make([]byte, 64+len(sink)%2) }
	for _, c := range []struct {
		budget int
		fail   bool
	}{{1, false}, {2, false}, {0, true}} {
		r := &recorder{TB: t}
		if got := Check(r, "call", c.budget, 5, 100, alloc); got != 1 {
			t.Errorf("budget %d: measured %.0f allocs, want 1", c.budget, got)
		}
		if r.failed != c.fail {
			t.Errorf("budget %d: failed %v, want %v (%q)", c.budget, r.failed, c.fail, r.logs)
		}
	}
	calls := 0
	Check(&recorder{TB: t}, "call", 1, 7, 10, func() { calls++ })
	if calls < 7+10 {
		t.Errorf("f called %d times, want the 7 warm calls and the measured ones", calls)
	}
}
