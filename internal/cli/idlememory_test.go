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
// profiles stops sampling allocations; one that does keeps the runtime's
// rate.
func TestSampleAllocationsOnlyWhenServed(t *testing.T) {
	setRate := func(rate int) {
		samplingMu.Lock()
		defer samplingMu.Unlock()
		runtime.MemProfileRate = rate
	}
	defer setRate(runtime.MemProfileRate)
	const rate = 512 * 1024
	setRate(rate)
	sampleAllocations(true)
	if runtime.MemProfileRate != rate {
		t.Errorf("with profiles served the sampling rate is %d, want %d", runtime.MemProfileRate, rate)
	}
	sampleAllocations(false)
	if runtime.MemProfileRate != 0 {
		t.Errorf("with no profiles served the sampling rate is %d, want 0 (off)", runtime.MemProfileRate)
	}
}
