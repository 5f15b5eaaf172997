package mcpserver_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/sqlite"
)

// openStore answers a migrated store on a fresh SQLite file, closed when
// the test ends.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "mcp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := sqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return store
}
