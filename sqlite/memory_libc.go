//go:build linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm)

package sqlite

import (
	"sync"
	_ "unsafe" // go:linkname

	"modernc.org/memory"
)

// SQLite's memory comes from modernc.org/libc's allocator, one per process
// on these platforms, which keeps the regions SQLite frees for reuse: up to
// 4 MB of each size class stays resident (regions of 64 KB, and of 128 KB
// to 2 MB for page caches and sorts), whether or not SQLite needs them
// again. On a node at rest after a load of calls that was 8 MB of its 28 MB
// of anonymous memory, beside 3 MB SQLite still used. libc v1.82 hands them
// back with libc.MemTrim; modernc.org/sqlite (v1.62, and v1.63, the newest)
// requires libc v1.80.1, which has the allocator's Trim but no function
// calling it, so releaseRetained names the allocator and the mutex every
// malloc and free of libc holds, and does what MemTrim does. A libc that
// renamed them would still link (each declaration below then defines its
// name itself), so TestLinkedNamesAreLibcs holds the pairing: a malloc
// waits on libcAllocatorMu and counts in libcAllocator. With libc v1.82
// this becomes libc.MemTrim.

//go:linkname libcAllocator modernc.org/libc.allocator
var libcAllocator memory.Allocator

//go:linkname libcAllocatorMu modernc.org/libc.allocatorMu
var libcAllocatorMu sync.Mutex

// releaseRetained unmaps the empty regions libc's allocator keeps for
// reuse. Regions holding a live allocation stay.
func releaseRetained() error {
	libcAllocatorMu.Lock()
	defer libcAllocatorMu.Unlock()
	return libcAllocator.Trim()
}
