package cli

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/internal/tick"
	"github.com/toolplane/toolplane/sqlite"
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

// releaseMemoryWhenIdle hands the heap's free pages, and SQLite's, back to
// the system once after each busy spell, when a whole window passed with
// almost no allocation. Under GOGC=300 (serve's default) the heap of a
// node that served a burst stays at up to four times its live size, and an
// idle node allocates too little to collect again: its resident memory
// would stay at the burst's peak until the runtime's forced collection and
// its slow scavenging. One collection and release per busy spell costs a
// few milliseconds; a node that stays busy never pays it. It returns when
// ctx ends.
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

// freeOSMemory is the release of a node gone idle: the heap's free pages,
// and the memory SQLite freed, its idle connections' among it, which its
// allocator would keep (sqlite.ReleaseMemory). An unmap that failed leaves
// its region mapped and nothing else changed, so its error is dropped.
func freeOSMemory() {
	debug.FreeOSMemory()
	_ = sqlite.ReleaseMemory()
}

// sampleAllocations turns the runtime's sampling of allocations for heap
// profiles off unless the node serves its profiles (--pprof-addr), the one
// place they can be read, or the operator set the rate themselves
// (memprofilerate in godebug, the process's GODEBUG). The runtime samples
// an allocation every 512 KB by default, recording its stack in a table of
// its own that is never freed: 1.5 MB of a node's resident memory
// (runtime/metrics' /memory/classes/profiling/buckets:bytes after a load of
// calls), and an unwinding of the stack per sample. Allocations sampled
// before this runs (the packages' initialisation) stay in the table.
func sampleAllocations(profilesServed bool, godebug string) {
	if profilesServed {
		return
	}
	for setting := range strings.SplitSeq(godebug, ",") {
		if name, _, _ := strings.Cut(setting, "="); strings.TrimSpace(name) == "memprofilerate" {
			return
		}
	}
	// The rate is the process's: nodes that tests start at once in one
	// process must not write it at once.
	samplingMu.Lock()
	defer samplingMu.Unlock()
	runtime.MemProfileRate = 0
}

// samplingMu orders the writes of runtime.MemProfileRate.
var samplingMu sync.Mutex
