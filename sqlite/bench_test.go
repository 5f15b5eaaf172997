package sqlite

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/storetest"
)

// BenchmarkStore runs the shared store benchmarks on a SQLite file.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) toolplane.Store { return newTestStore(b) })
}
