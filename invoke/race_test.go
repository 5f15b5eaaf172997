//go:build race

package invoke_test

// raceEnabled is set when the tests run under the race detector, which
// slows every call many times over: timing bounds are then only logged.
const raceEnabled = true
