//go:build !race

package httpruntime_test

// raceEnabled is set when the tests run under the race detector, which
// makes allocations per call vary (see the allocation budgets).
const raceEnabled = false
