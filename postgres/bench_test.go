package postgres

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/storetest"
)

// BenchmarkStore runs the shared store benchmarks on a fresh schema of the
// PostgreSQL in TOOLPLANE_TEST_POSTGRES.
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) toolplane.Store { return newTestStore(b) })
}
