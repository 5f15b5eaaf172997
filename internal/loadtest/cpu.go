package loadtest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ),
// which Linux fixes at 100 per second for user space whatever the kernel's
// own tick.
const clockTick = 10 * time.Millisecond

// ProcessCPU answers the CPU time (user and system) the processes have used
// so far, on Linux. Throughput on a machine shared with other work moves
// with whatever else runs; the CPU a server spends per call does much
// less, so it is the steadier figure for comparing two servers.
//
// Each process is read from its CPU-time clock (clock_gettime of the
// process's clock id, to the nanosecond, threads that have exited
// included), or, where the kernel refuses that clock, from
// /proc/<pid>/stat, whose utime and stime count 10 ms ticks: a 1 s cell
// of a server spending 200 ms would be read to ±5% from /proc alone.
func ProcessCPU(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		d, err := processClock(pid)
		if err != nil {
			if d, err = statCPU(pid); err != nil {
				return 0, err
			}
		}
		total += d
	}
	return total, nil
}

// processClock reads the CPU-time clock of process pid: the clock id
// clock_getcpuclockid(3) would answer, CPUCLOCK_SCHED of the whole thread
// group, which is (^pid)<<3 | 2 in Linux's encoding.
func processClock(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("process cpu: no process %d", pid)
	}
	clock := (^pid)<<3 | 2
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, fmt.Errorf("process cpu: clock of process %d: %w", pid, e)
	}
	return time.Duration(ts.Nano()), nil
}

// statCPU reads utime and stime from /proc/<pid>/stat.
func statCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("process cpu: %w", err)
	}
	d, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("process cpu: /proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// errStat is what parseStatCPU answers for a line it cannot read.
var errStat = errors.New("not a /proc/<pid>/stat line")

// parseStatCPU answers utime+stime of one /proc/<pid>/stat line.
func parseStatCPU(s string) (time.Duration, error) {
	// The command name, in parentheses, may hold spaces and parentheses:
	// fields are counted from the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: no command name", errStat)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(3) ... utime(14) stime(15), 1-based.
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: %d fields after the name", errStat, len(f))
	}
	var total time.Duration
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: cpu field %q", errStat, v)
		}
		total += time.Duration(n) * clockTick
	}
	return total, nil
}
