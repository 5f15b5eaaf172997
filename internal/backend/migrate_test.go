package backend

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite"
)

// Nodes started at once on one database, each with its pools as serve
// opens them, all migrate it: every node's Migrate succeeds and each of
// River's migrations is recorded once. River's migrator reads which
// versions are applied before it applies the rest, each in a transaction
// of its own; when two nodes migrated River's schema at once, the one that
// read first applied again what the other had meanwhile ("table
// river_migration already exists", "no such index:
// river_migration_version_idx" on SQLite; a duplicate key in
// pg_type_typname_nsp_index on PostgreSQL) and the node failed to start.
func TestMigrateFromSeveralNodesAtOnce(t *testing.T) {
	t.Parallel()
	sqliteFile := func(t *testing.T) string {
		t.Helper()
		return filepath.Join(t.TempDir(), "toolplane.db")
	}
	tests := []struct {
		name string
		// database answers the database the nodes open, readied.
		database func(t *testing.T) string
		// count answers the number of rows query finds in database.
		count func(t *testing.T, database, query string) int
	}{
		{name: "SQLite, fresh file", database: sqliteFile, count: countSQLite},
		{
			// As after an upgrade that brings River migrations: the nodes
			// pass toolplane's schema quickly and meet on River's.
			name: "SQLite, toolplane's schema current, River's not",
			database: func(t *testing.T) string {
				t.Helper()
				path := sqliteFile(t)
				if err := sqlite.New(openPool(t, path)).Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
				return path
			},
			count: countSQLite,
		},
		{
			name:     "PostgreSQL, fresh schema",
			database: func(t *testing.T) string { return pgtest.SchemaDSN(t, pgtest.DSN(t)) },
			count: func(t *testing.T, dsn, query string) int {
				t.Helper()
				conn, err := pgx.Connect(t.Context(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.WithoutCancel(t.Context()))
				var n int
				if err := conn.QueryRow(t.Context(), query).Scan(&n); err != nil {
					t.Fatalf("%s: %v", query, err)
				}
				return n
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			database := tt.database(t)
			const nodes = 6
			bs := make([]*Backend, nodes)
			for i := range bs {
				b, err := Open(ctx, database)
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
			// Each version once, from 1 up to the highest.
			const query = `SELECT COUNT(*) FROM river_migration m
				WHERE m.version = 1 OR EXISTS (SELECT 1 FROM river_migration p WHERE p.version = m.version - 1)`
			rows, versions := tt.count(t, database, `SELECT COUNT(*) FROM river_migration`), tt.count(t, database, query)
			if rows == 0 || rows != versions {
				t.Errorf("river_migration: %d rows, %d of them each version once from 1 up", rows, versions)
			}
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
	if n := countSQLite(t, path, `SELECT COUNT(*) FROM river_migration`); n == 0 {
		t.Error("river_migration is empty after River's migration")
	}
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

// countSQLite answers the number of rows query finds in the file at path.
func countSQLite(t *testing.T, path, query string) int {
	t.Helper()
	var n int
	if err := openPool(t, path).QueryRowContext(t.Context(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// A node whose pool holds one connection (pool_max_conns=1 in its DSN)
// migrates River's schema too: nothing may hold a connection while
// River's migration waits for one.
func TestMigratePostgresOnAPoolOfOne(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	b, err := Open(ctx, dsn+sep+"pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(ctx); err != nil {
		t.Fatalf("Migrate on a pool of one: %v", err)
	}
}
