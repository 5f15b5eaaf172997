//go:build !race

package httpapi_test

// raceEnabled is set when the tests run under the race detector, which
// makes allocations per call vary (see the allocation budgets).
const raceEnabled = false
