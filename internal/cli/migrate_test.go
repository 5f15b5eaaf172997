package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/postgres/pgtest"
)

// pendingLine matches a status line of a migration not applied.
var pendingLine = regexp.MustCompile(`(?m)\spending\s*$`)

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "sub", "toolplane.db")
	code, out, errOut := run("migrate", "--database", db, "status")
	if code != 0 || !pendingLine.MatchString(out) || !strings.Contains(errOut, "pending: run toolplane migrate up") {
		t.Fatalf("status before: %d %q %q", code, out, errOut)
	}
	// up says what it applied, then that there is nothing left to apply.
	code, out, errOut = run("migrate", "up", "--database", db)
	if code != 0 || !regexp.MustCompile(`applied \d+ migration\(s\): 0001 `).MatchString(out) {
		t.Fatalf("up: %d %q %q", code, out, errOut)
	}
	code, out, errOut = run("migrate", "--database", db, "up")
	if code != 0 || !strings.Contains(out, "already up to date") || strings.Contains(out, "0001") {
		t.Fatalf("up again: %d %q %q", code, out, errOut)
	}
	code, out, errOut = run("migrate", "status", "--database", db)
	// A line's state ends it: a migration's name may hold the word
	// (0017 one_pending_approval).
	if code != 0 || !strings.Contains(out, "0001") || pendingLine.MatchString(out) || errOut != "" {
		t.Fatalf("status after: %d %q %q", code, out, errOut)
	}
	if code, _, _ := run("migrate", "--database", db, "sideways"); code != 2 {
		t.Fatal("an unknown subcommand was accepted")
	}
}

func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	schema := pgtest.Schema(t, dsn)
	scoped := pgtest.InSchema(dsn, schema)
	code, out, errOut := run("migrate", "--database", scoped, "up")
	if code != 0 || !strings.HasPrefix(out, "postgres ") || !strings.Contains(out, "applied") {
		t.Fatalf("up: %d %q %q", code, out, errOut)
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('claims', 'river_job')`, schema).Scan(&n); err != nil || n != 2 {
		t.Fatalf("tables in %s: %d %v", schema, n, err)
	}
}
