//go:build unix

package policytest

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used, user and system: what a
// benchmark on a machine shared with other work can divide by its
// operations when wall time would count the waits for a core.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
