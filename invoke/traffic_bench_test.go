package invoke_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/resilience"
)

// TestTrafficSideBySide measures, in one run, what one hanging downstream
// does to the other tools of a node, with the protections on and off
// (serve --traffic-protection=off): healthy clients call other.read in a
// closed loop while callers fire crm.read, whose downstream hangs until
// the call's timeout, at a fixed rate. It is a measurement, not a check:
// set TOOLPLANE_TRAFFIC_BENCH=1 to run it (on SQLite, the audit writer on).
//
//	TOOLPLANE_TRAFFIC_BENCH=1 go test ./invoke -run TrafficSideBySide -v -count=1 -timeout 30m
//
// TOOLPLANE_TRAFFIC_ROUNDS sets the rounds (default 3).
func TestTrafficSideBySide(t *testing.T) {
	if os.Getenv("TOOLPLANE_TRAFFIC_BENCH") == "" {
		t.Skip("a measurement: set TOOLPLANE_TRAFFIC_BENCH=1")
	}
	const (
		phase   = 5 * time.Second
		healthy = 8                     // closed-loop clients of other.read
		rate    = 2000                  // calls a second to the hanging tool
		hang    = 5 * time.Second       // the hanging tool's timeout
		tick    = 10 * time.Millisecond // the open-loop callers' pace
	)
	type row struct {
		name                string
		calls               int
		p50, p99            time.Duration
		perSec              float64
		refused, hangCalls  int64
		goroutines, heapMiB int
		cpuPerCall          time.Duration
		handlerRuns         int64
		// downstreamOpen is the most calls held open at the hanging
		// downstream at once.
		downstreamOpen int64
	}
	run := func(name string, protected, hanging bool) row {
		ctx := context.Background()
		b, err := backend.Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var cfg *resilience.Config
		if protected {
			cfg = &resilience.Config{}
		}
		e := newTrafficEnvWith(t, b.Store, cfg, time.Now, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(hang) })
		var open, peakOpen atomic.Int64
		e.crm.answer = func(ctx context.Context, _ int64) (any, error) {
			n := open.Add(1)
			for p := peakOpen.Load(); n > p && !peakOpen.CompareAndSwap(p, n); p = peakOpen.Load() {
			}
			defer open.Add(-1)
			<-ctx.Done() // the downstream never answers: the call's timeout ends it
			return nil, ctx.Err()
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var refused, hangCalls atomic.Int64
		var peakG, peakHeap atomic.Int64
		if hanging {
			wg.Add(1)
			go func() { // open loop: rate calls a second, whatever answers
				defer wg.Done()
				tk := time.NewTicker(tick)
				defer tk.Stop()
				n := 0
				for {
					select {
					case <-stop:
						return
					case <-tk.C:
					}
					for range rate * int(tick) / int(time.Second) {
						n++
						in := inv("crm.read")
						in.AgentID = fmt.Sprintf("agent-h%d", n%500)
						in.Principal.ID = in.AgentID
						wg.Add(1)
						go func() {
							defer wg.Done()
							r, _ := e.iv.Invoke(ctx, "crm.read", args(), in)
							hangCalls.Add(1)
							if !r.OK && r.Error != nil && r.Error.RetryAfter > 0 {
								refused.Add(1)
							}
						}()
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // sample goroutines and heap
			defer wg.Done()
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if g := int64(runtime.NumGoroutine()); g > peakG.Load() {
					peakG.Store(g)
				}
				runtime.ReadMemStats(&ms)
				if h := int64(ms.HeapAlloc); h > peakHeap.Load() {
					peakHeap.Store(h)
				}
			}
		}()
		lat := make([][]time.Duration, healthy)
		cpu0 := cpuTime()
		start := time.Now()
		var hw sync.WaitGroup
		for i := range healthy {
			hw.Add(1)
			go func() {
				defer hw.Done()
				in := inv("other.read")
				in.AgentID = fmt.Sprintf("agent-%d", i)
				in.Principal.ID = in.AgentID
				for time.Since(start) < phase {
					s := time.Now()
					r, err := e.iv.Invoke(ctx, "other.read", args(), in)
					if err != nil || !r.OK {
						t.Errorf("healthy call failed: %+v %v", r.Error, err)
						return
					}
					lat[i] = append(lat[i], time.Since(s))
				}
			}()
		}
		hw.Wait()
		took := time.Since(start)
		cpu := cpuTime() - cpu0
		close(stop)
		wg.Wait()
		all := slices.Concat(lat...)
		slices.Sort(all)
		r := row{name: name, calls: len(all), perSec: float64(len(all)) / took.Seconds(),
			refused: refused.Load(), hangCalls: hangCalls.Load(), goroutines: int(peakG.Load()), heapMiB: int(peakHeap.Load() >> 20),
			handlerRuns: e.crm.calls.Load(), downstreamOpen: peakOpen.Load()}
		if len(all) > 0 {
			r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
			r.cpuPerCall = cpu / time.Duration(int64(len(all))+r.hangCalls)
		}
		return r
	}
	// The three runs alternate, round after round, so that a shared
	// machine's load falls on each alike; each is reported against the
	// baseline of its own round, and the median round is named.
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("TOOLPLANE_TRAFFIC_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	t.Logf("%d healthy clients of other.read for %v; crm.read fired at %d/s, its downstream hanging until its %v timeout; GOMAXPROCS=%d",
		healthy, phase, rate, hang, runtime.GOMAXPROCS(0))
	t.Logf("%-6s %-42s %10s %9s %9s %8s %8s %11s %9s %10s %10s %8s %9s %9s", "round", "run", "other/s", "p50", "p99", "vs base", "p99 x",
		"hang calls", "refused", "handlers", "at hang", "peak G", "heap MiB", "cpu/call")
	var onRatio, offRatio []float64
	for round := range rounds {
		rows := []row{
			run("healthy only, protections on", true, false),
			run("one downstream hanging, protections on", true, true),
			run("one downstream hanging, protections off", false, true),
		}
		for _, r := range rows {
			t.Logf("%-6d %-42s %10.0f %9v %9v %7.0f%% %8.2f %11d %9d %10d %10d %8d %9d %9v",
				round+1, r.name, r.perSec, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), 100*r.perSec/rows[0].perSec,
				float64(r.p99)/float64(rows[0].p99), r.hangCalls, r.refused, r.handlerRuns, r.downstreamOpen, r.goroutines, r.heapMiB, r.cpuPerCall.Round(time.Microsecond))
		}
		onRatio = append(onRatio, rows[1].perSec/rows[0].perSec)
		offRatio = append(offRatio, rows[2].perSec/rows[0].perSec)
	}
	slices.Sort(onRatio)
	slices.Sort(offRatio)
	t.Logf("median throughput of other.read beside the hanging downstream: %.0f%% with the protections, %.0f%% without",
		100*onRatio[len(onRatio)/2], 100*offRatio[len(offRatio)/2])
}

// cpuTime answers the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
