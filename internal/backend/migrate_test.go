package backend

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/sqlite"
)

// Nodes started at once on one embedded file, each with its pools as serve
// opens them, all migrate it: every node's Migrate succeeds and each of
// River's migrations is recorded once. River's migrator reads which
// versions are applied before it applies the rest, each in a transaction
// of its own; when two nodes migrated River's schema at once, the one that
// read first applied again what the other had meanwhile ("table
// river_migration already exists", "no such index:
// river_migration_version_idx") and the node failed to start.
func TestMigrateFromSeveralNodesAtOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// prepare readies the file before the nodes start.
		prepare func(t *testing.T, path string)
	}{
		{name: "fresh file", prepare: func(*testing.T, string) {}},
		{
			// As after an upgrade that brings River migrations: the nodes
			// pass toolplane's schema quickly and meet on River's.
			name: "toolplane's schema current, River's not",
			prepare: func(t *testing.T, path string) {
				t.Helper()
				db := openPool(t, path)
				if err := sqlite.New(db).Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "toolplane.db")
			tt.prepare(t, path)
			const nodes = 6
			bs := make([]*Backend, nodes)
			for i := range bs {
				b, err := Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				bs[i] = b
			}
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				errs  = make([]error, nodes)
			)
			for i, b := range bs {
				wg.Go(func() {
					<-start
					errs[i] = b.Migrate(ctx)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("node %d: Migrate: %v", i, err)
				}
			}
			checkRiverMigrated(t, ctx, openPool(t, path))
		})
	}
}

// River's migration on an embedded file waits for a write lock another
// connection holds past its busy timeout (a live node's long write, or one
// node after another migrating the file while this one sleeps between
// SQLite's polls) as toolplane's own migration does, instead of failing the
// node's start with SQLITE_BUSY.
func TestMigrateRiverWaitsOutALockHeldPastTheBusyTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "toolplane.db")
	held, err := openPool(t, path).BeginTx(ctx, nil) // immediate: it takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()

	// River's pool, as openSQLite makes it, but its one connection gives
	// up waiting for the lock after 20 ms, so the lock is held for many
	// busy timeouts without the test waiting out the ten seconds of
	// Open's.
	rdb := openPool(t, path)
	rdb.SetMaxOpenConns(1)
	if _, err := rdb.ExecContext(ctx, `PRAGMA busy_timeout = 20`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- migrateRiverSQLite(ctx, rdb) }()
	select {
	case err := <-migrated:
		t.Fatalf("River's migration returned while another connection held the write lock: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := held.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("River's migration after the lock was let go: %v", err)
	}
	checkRiverMigrated(t, ctx, rdb)
}

// openPool opens a pool on the file at path as openSQLite does, closed
// when the test ends.
func openPool(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkRiverMigrated fails t unless river_migration records each of
// River's versions once, from 1 up.
func checkRiverMigrated(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	var rows, versions, lowest, highest int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT version), MIN(version), MAX(version) FROM river_migration`).
		Scan(&rows, &versions, &lowest, &highest)
	if err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != versions || lowest != 1 || highest != versions {
		t.Errorf("river_migration: %d rows, %d versions, %d to %d; want each version once, from 1 up", rows, versions, lowest, highest)
	}
}
