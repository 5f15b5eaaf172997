// Package race tells whether the binary is built with the race detector,
// for tests whose figures it changes: allocation counts and timings.
package race
