package cli

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/toolplane/toolplane/internal/tick"
)

// How a node hands back the memory a burst of calls left it.
const (
	// idleCheckEvery is how often the node looks whether it went idle:
	// one read of the runtime's allocation counter, on the node's grid
	// (internal/tick) with the sweep and the change feed's keep-alives,
	// so it costs an idle node no wake-up of its own.
	idleCheckEvery = 10 * time.Second
	// idleAllocs is what a window may allocate and still count as idle:
	// the background work of an idle node allocates a few hundred KB a
	// minute, a node serving calls megabytes a second.
	idleAllocs = 4 << 20
)

// releaseMemoryWhenIdle hands the heap's free pages back to the system
// once after each busy spell, when a whole window passed with almost no
// allocation. Under GOGC=300 (serve's default) the heap of a node that
// served a burst stays at up to four times its live size, and an idle
// node allocates too little to collect again: its resident memory would
// stay at the burst's peak until the runtime's forced collection and its
// slow scavenging. One collection and release per busy spell costs a few
// milliseconds; a node that stays busy never pays it. It returns when ctx
// ends.
func releaseMemoryWhenIdle(ctx context.Context, every time.Duration, release func()) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	last, busy := read(), false
	t := tick.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		t.Next()
		now := read()
		grew := now - last
		last = now
		switch {
		case grew > idleAllocs:
			busy = true
		case busy:
			busy = false
			release()
		}
	}
}

// freeOSMemory is the release of a node gone idle.
func freeOSMemory() { debug.FreeOSMemory() }
