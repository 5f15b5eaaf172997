package loadtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ),
// which Linux fixes at 100 per second for user space whatever the kernel's
// own tick.
const clockTick = 10 * time.Millisecond

// ProcessCPU answers the CPU time (user and system) the processes have used
// so far, from /proc on Linux. Throughput on a machine shared with other
// work moves with whatever else runs; the CPU a server spends per call
// does much less, so it is the steadier figure for comparing two servers.
func ProcessCPU(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("process cpu: %w", err)
		}
		// The command name, in parentheses, may hold spaces: fields are
		// counted from the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0, fmt.Errorf("process cpu: /proc/%d/stat: no command name", pid)
		}
		f := strings.Fields(s[i+1:])
		// After the name: state(3) ... utime(14) stime(15), 1-based.
		if len(f) < 13 {
			return 0, fmt.Errorf("process cpu: /proc/%d/stat: %d fields", pid, len(f))
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("process cpu: /proc/%d/stat: %w", pid, err)
			}
			total += time.Duration(n) * clockTick
		}
	}
	return total, nil
}
