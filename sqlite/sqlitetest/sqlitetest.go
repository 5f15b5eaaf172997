// Package sqlitetest opens real, migrated SQLite stores for the tests of
// the packages built on a store, so each opens one the same way (a file
// of its own, closed when the test ends) instead of carrying a copy of
// the steps.
package sqlitetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/sqlite"
)

// New answers a migrated store on a fresh database file in t's temporary
// directory.
func New(t testing.TB) *sqlite.Store {
	t.Helper()
	s, _ := NewDB(t)
	return s
}

// NewDB is New that also answers the database, for a test that reads a
// table the store does not expose.
func NewDB(t testing.TB) (*sqlite.Store, *sql.DB) {
	t.Helper()
	return OpenDB(t, filepath.Join(t.TempDir(), "toolplane.db"))
}

// Open answers a migrated store on the database file at path, created
// when missing: a test opens a server's file beside it, as a second
// process on the same database would.
func Open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, _ := OpenDB(t, path)
	return s
}

// OpenDB is Open that also answers the database. The database is closed
// by t.Cleanup.
func OpenDB(t testing.TB, path string) (*sqlite.Store, *sql.DB) {
	t.Helper()
	// Not t's context: the store outlives this call, and the database
	// closes by t.Cleanup, not by a cancelled context.
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	s := sqlite.New(db)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate %s: %v", path, err)
	}
	return s, db
}
