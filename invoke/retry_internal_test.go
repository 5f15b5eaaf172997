package invoke

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// Each pause is drawn from zero to its ceiling (full jitter), the
// ceilings doubling from backoff up to max_backoff: a draw never passes
// its ceiling, and the draws spread over the whole range rather than
// bunching near it.
func TestFullJitterBounds(t *testing.T) {
	t.Parallel()
	e := &toolplane.Execution{Backoff: toolplane.Duration(100 * time.Millisecond), MaxBackoff: toolplane.Duration(time.Second)}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for n, ceiling := range want {
		if got := e.PauseCeiling(n); got != ceiling {
			t.Fatalf("ceiling after retry %d: %v, want %v", n, got, ceiling)
		}
		lo, hi := ceiling, time.Duration(0)
		for range 2000 {
			p := jitter(ceiling)
			if p < 0 || p > ceiling {
				t.Fatalf("pause %v outside [0, %v]", p, ceiling)
			}
			lo, hi = min(lo, p), max(hi, p)
		}
		if lo > ceiling/10 || hi < ceiling*9/10 {
			t.Errorf("2000 draws under %v spread only over [%v, %v]", ceiling, lo, hi)
		}
	}
	if jitter(0) != 0 {
		t.Error("a zero ceiling draws a pause")
	}
	// The defaults, and a ceiling that would overflow when doubled.
	var none *toolplane.Execution
	if none.PauseCeiling(0) != toolplane.DefaultBackoff || none.PauseCeiling(62) != toolplane.DefaultMaxBackoff {
		t.Errorf("default ceilings %v, %v", none.PauseCeiling(0), none.PauseCeiling(62))
	}
}
