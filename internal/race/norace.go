//go:build !race

package race

// Enabled is set when the binary is built with the race detector.
const Enabled = false
