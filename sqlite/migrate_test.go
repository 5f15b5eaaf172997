package sqlite

import (
	"path/filepath"
	"testing"
	"time"
)

// A node that starts while another holds the database's write lock for
// longer than busy_timeout (a long migration, or nodes starting at once
// taking the lock one after another) waits for the lock and migrates,
// instead of failing its start with SQLITE_BUSY.
func TestMigrateWaitsOutALockHeldPastTheBusyTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "toolplane.db")
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	held, err := other.BeginTx(ctx, nil) // immediate: it takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// This node's one connection gives up waiting for the lock after
	// 20 ms, so the lock is held for many busy timeouts without the test
	// waiting out the ten seconds of Open's.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `PRAGMA busy_timeout = 20`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- New(db).Migrate(ctx) }()
	select {
	case err := <-migrated:
		t.Fatalf("Migrate returned while another connection held the write lock: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := held.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate after the lock was let go: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("schema_migrations rows = %d, %v; want every migration recorded", n, err)
	}
}
