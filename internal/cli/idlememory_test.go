package cli

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

var sink []byte

// TestReleaseMemoryWhenIdle: a busy spell (allocating) followed by idle
// windows releases once, and idle windows alone never do.
func TestReleaseMemoryWhenIdle(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var released atomic.Int64
	const every = 100 * time.Millisecond
	go releaseMemoryWhenIdle(ctx, every, func() { released.Add(1) })

	time.Sleep(3 * every)
	if n := released.Load(); n != 0 {
		t.Fatalf("released %d times with nothing allocated", n)
	}
	// Busy: well over idleAllocs a window, for a few windows.
	for end := time.Now().Add(3 * every); time.Now().Before(end); {
		sink = make([]byte, 1<<20)
		time.Sleep(time.Millisecond)
	}
	sink = nil
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(every / 4)
	}
	time.Sleep(5 * every)
	if n := released.Load(); n != 1 {
		t.Fatalf("released %d times after one busy spell, want 1", n)
	}
}

// TestSampleAllocationsOnlyWhenServed: a node that does not serve its
// profiles stops sampling allocations, unless the operator set the rate in
// GODEBUG; one that does keeps the runtime's rate.
func TestSampleAllocationsOnlyWhenServed(t *testing.T) {
	setRate := func(rate int) {
		samplingMu.Lock()
		defer samplingMu.Unlock()
		runtime.MemProfileRate = rate
	}
	defer setRate(runtime.MemProfileRate)
	const rate = 512 * 1024
	for _, c := range []struct {
		served  bool
		godebug string
		want    int
	}{
		{true, "", rate},
		{false, "", 0},
		{false, "gctrace=1", 0},
		{false, "memprofilerate=512", rate},
		{false, "gctrace=1, memprofilerate=1", rate},
		{false, "xmemprofilerate=1", 0},
	} {
		setRate(rate)
		sampleAllocations(c.served, c.godebug)
		if runtime.MemProfileRate != c.want {
			t.Errorf("profiles served %v, GODEBUG %q: the sampling rate is %d, want %d", c.served, c.godebug, runtime.MemProfileRate, c.want)
		}
	}
}
