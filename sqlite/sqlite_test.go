package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/storetest"
)

// openTest opens a fresh database file under t's temporary directory and
// closes it when t ends.
func openTest(t testing.TB) *sql.DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTestStore answers a migrated store on a fresh database file.
func newTestStore(t testing.TB) *Store {
	t.Helper()
	s := New(openTest(t))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) toolplane.Store { return newTestStore(t) })
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := New(openTest(t))
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	first, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
	}
	again, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(first) {
		t.Fatalf("after re-running, %d migrations, want %d", len(again), len(first))
	}
	for i := range first {
		if again[i] != first[i] {
			t.Errorf("re-running changed migration %d: %+v, was %+v", first[i].Version, again[i], first[i])
		}
	}
	var rows int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(first) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, len(first))
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	db := openTest(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := New(db).Migrate(t.Context()); err != nil {
				t.Errorf("concurrent Migrate: %v", err)
			}
		})
	}
	wg.Wait()
	status, err := New(db).MigrationStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range status {
		if !m.Applied {
			t.Errorf("migration %d not applied", m.Version)
		}
	}
}

func TestMigrationStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := New(openTest(t))
	embedded, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) == 0 {
		t.Fatal("no migrations embedded")
	}

	before, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatalf("MigrationStatus before Migrate: %v", err)
	}
	if len(before) != len(embedded) {
		t.Fatalf("MigrationStatus answered %d migrations, want %d", len(before), len(embedded))
	}
	for i, m := range before {
		want := Migration{Version: embedded[i].Version, Name: embedded[i].Name}
		if m != want {
			t.Errorf("before Migrate: %+v, want %+v", m, want)
		}
	}

	start := time.Now().Add(-time.Second)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range after {
		if m.Version != embedded[i].Version || m.Name != embedded[i].Name || !m.Applied {
			t.Errorf("after Migrate: %+v, want version %d %q applied", m, embedded[i].Version, embedded[i].Name)
		}
		if m.AppliedAt.Before(start) || m.AppliedAt.After(time.Now()) || m.AppliedAt.Location() != time.UTC {
			t.Errorf("migration %d AppliedAt = %v, want a UTC time from this test", m.Version, m.AppliedAt)
		}
	}

	// A version this binary does not know (a newer binary applied it) is
	// reported, not hidden.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 0)`); err != nil {
		t.Fatal(err)
	}
	withFuture, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := withFuture[len(withFuture)-1]
	if len(withFuture) != len(after)+1 || last.Version != 9999 || last.Name != "from_the_future" || !last.Applied {
		t.Errorf("unknown applied migration reported as %+v (of %d)", last, len(withFuture))
	}
}

func TestEmbeddedMigrationsAreNumberedInOrder(t *testing.T) {
	t.Parallel()
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range all {
		if m.Version != i+1 {
			t.Errorf("migration %d_%s: versions must run 1, 2, 3, ... without gaps; want %d", m.Version, m.Name, i+1)
		}
		if strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %d_%s is empty", m.Version, m.Name)
		}
	}
}

func TestOpenSetsPragmasOnEveryConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTest(t)
	const n = 6
	// Hold n connections at once, so the pool must open n distinct ones.
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	tests := []struct {
		pragma, want string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "10000"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
	}
	for i, c := range conns {
		for _, tt := range tests {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got); err != nil {
				t.Fatalf("connection %d: PRAGMA %s: %v", i, tt.pragma, err)
			}
			if !strings.EqualFold(got, tt.want) {
				t.Errorf("connection %d: PRAGMA %s = %q, want %q", i, tt.pragma, got, tt.want)
			}
		}
	}
}

func TestOpenPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		wantErr bool
	}{
		{"plain", filepath.Join(dir, "a.db"), false},
		{"URI characters in the name", filepath.Join(dir, "b?mode=ro#x%20y.db"), false},
		{"spaces", filepath.Join(dir, "with space.db"), false},
		{"missing directory", filepath.Join(dir, "absent", "c.db"), true},
		{"empty", "", true},
		{"memory", ":memory:", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(t.Context(), tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Open(%q) err = %v, want error: %v", tt.path, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer db.Close()
			s := New(db)
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			var file string
			if err := db.QueryRowContext(t.Context(), `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
				t.Fatal(err)
			}
			if file != tt.path {
				t.Errorf("database file = %q, want %q", file, tt.path)
			}
		})
	}
}

func TestCursorRefusedByAnotherList(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	for i := range 2 {
		e := &toolplane.AuditEvent{ID: string(rune('a' + i)), OrganizationID: "org", CreatedAt: time.Now()}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	_, next, err := s.ListAudit(ctx, "org", toolplane.AuditFilter{}, "", 1)
	if err != nil || next == "" {
		t.Fatalf("ListAudit = %q, %v; want a next cursor", next, err)
	}
	if _, _, err := s.ListClaims(ctx, "org", toolplane.ClaimProcessing, next, 10); !errors.Is(err, errCursor) {
		t.Errorf("ListClaims(audit cursor) err = %v, want errCursor", err)
	}
	if _, _, err := s.ListApprovals(ctx, "org", toolplane.ApprovalPending, next, 10); !errors.Is(err, errCursor) {
		t.Errorf("ListApprovals(audit cursor) err = %v, want errCursor", err)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		createdAt int64
		parts     []string
	}{
		{"claim", 1_741_946_966_535_897, []string{"payments.refund_order", "5:run-1"}},
		{"any byte", -1, []string{"\x00\xff", ""}},
		{"zero time", zeroMicros, []string{"id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cursor.Encode(cursor.Claims, tt.createdAt, tt.parts...)
			at, parts, err := cursor.Decode(c, cursor.Claims, len(tt.parts))
			if err != nil || at != tt.createdAt || strings.Join(parts, "|") != strings.Join(tt.parts, "|") {
				t.Errorf("decode(encode) = %d, %q, %v", at, parts, err)
			}
			if _, _, err := cursor.Decode(c, cursor.Claims, len(tt.parts)+1); err == nil {
				t.Error("decoding with one part too many succeeded")
			}
			if _, _, err := cursor.Decode(c, cursor.Audit, len(tt.parts)); err == nil {
				t.Error("decoding as another list's cursor succeeded")
			}
		})
	}
}

// TestQueriesUseIndexes keeps the list and lookup queries off full table
// scans, which would pass every functional test and fail in production.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	tests := []struct {
		name, query string
		args        []any
	}{
		{"GetClaim", `SELECT * FROM claims WHERE organization_id = ? AND tool = ? AND key = ?`, []any{"o", "t", "k"}},
		{"ListClaims page", `SELECT * FROM claims WHERE organization_id = ? AND status = ? AND (created_at, tool, key) > (?, ?, ?) ORDER BY created_at, tool, key LIMIT 10`, []any{"o", "s", 0, "t", "k"}},
		{"FindApprovals", `SELECT * FROM approvals WHERE organization_id = ? AND run_id = ? AND key = ? ORDER BY created_at DESC, id DESC`, []any{"o", "r", "k"}},
		{"ListApprovals page", `SELECT * FROM approvals WHERE organization_id = ? AND status = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT 10`, []any{"o", "s", 0, "i"}},
		{"RunTreeCost", `SELECT COALESCE(SUM(cost_cents), 0) FROM usage WHERE organization_id = ? AND root_run_id = ?`, []any{"o", "r"}},
		{"ListAudit page", `SELECT * FROM audit_events WHERE organization_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", 0, "i"}},
		{"ListAudit by run", `SELECT * FROM audit_events WHERE organization_id = ? AND run_id = ? ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(plan, "; ")
			if !strings.Contains(joined, "USING") || strings.Contains(joined, "TEMP B-TREE") {
				t.Errorf("plan %q: want an index search without a sort", joined)
			}
		})
	}
}
