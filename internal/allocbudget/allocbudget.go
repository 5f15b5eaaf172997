// Package allocbudget holds a hot path's allocations per call under a
// budget, as a test that fails above it.
//
// Allocations per call barely move with the machine's load, unlike time,
// so a budget is a deterministic check that a change did not make a hot
// path dearer. A budget is set a little above the figure measured when it
// was set; an optimisation that lowers the figure lowers the budget in
// the same change.
//
// The race detector adds allocations and makes them vary from run to run
// (sync.Pool drops a quarter of what it is given at random: a write call
// measured 289–291 allocations under it against 274–276 without), so
// budgets are not measured under it; .ci/run runs them without it.
package allocbudget

import (
	"testing"

	"github.com/toolplane/toolplane/internal/race"
)

// Skip skips t when the tests run under the race detector. A budget test
// calls it first, before any setup it would waste.
func Skip(t testing.TB) {
	t.Helper()
	if race.Enabled {
		t.Skip("allocation budgets are not measured under the race detector")
	}
}

// Check calls f warm times (caches, pools and lazily built state settle),
// then measures its allocations over runs calls with
// testing.AllocsPerRun, logs the figure beside the budget, and fails t
// when it is over. per names what one call of f is ("call",
// "decision"). It answers the figure, for a test to say more of it.
//
// testing.AllocsPerRun refuses to run beside parallel tests, so a budget
// test is not parallel.
func Check(t testing.TB, per string, budget, warm, runs int, f func()) float64 {
	t.Helper()
	for range warm {
		f()
	}
	got := testing.AllocsPerRun(runs, f)
	t.Logf("%.0f allocs per %s (budget %d)", got, per, budget)
	if got > float64(budget) {
		t.Errorf("%.0f allocs per %s, over the budget of %d", got, per, budget)
	}
	return got
}
