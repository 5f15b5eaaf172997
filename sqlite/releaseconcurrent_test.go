package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReleaseMemoryConcurrentCallers: nodes of one process (the tests
// start several) rest on one grid (internal/tick) and so call
// ReleaseMemory at once, each over every pool Open made. database/sql's
// SetMaxIdleConns closes the connections it drops outside the pool's lock,
// reading them from the pool's own array; a second caller's restored limit
// let returned connections be appended into that array meanwhile, so a
// pooled connection was closed (the next read handed it panicked) and the
// one it overwrote never was (counted open and in use for good). Callers
// now take turns; without that this failed about two runs in three.
func TestReleaseMemoryConcurrentCallers(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var queryErrs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	// Each of the goroutines does its part again and again until the
	// deadline.
	deadline := time.Now().Add(3 * time.Second)
	again := func(f func()) {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				f()
			}
		})
	}
	for range 16 {
		again(func() {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
				queryErrs.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	for range 2 { // the nodes' idle checks
		again(func() { _ = ReleaseMemory() })
	}
	wg.Wait()
	if n := queryErrs.Load(); n > 0 {
		t.Errorf("%d reads failed while two callers released the pool; the first: %v", n, firstErr.Load())
	}
	db.SetMaxIdleConns(0) // close every idle connection: none is in use
	if st := db.Stats(); st.OpenConnections != 0 || st.InUse != 0 {
		t.Errorf("pool at rest with every idle connection closed: %d open, %d in use, %d idle; want 0 open (a connection leaked)",
			st.OpenConnections, st.InUse, st.Idle)
	}
}
