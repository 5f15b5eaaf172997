package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/storetest"
)

// dsnVariable names the environment variable holding the test database's
// DSN. Without it the tests that need a server skip.
const dsnVariable = "TOOLPLANE_TEST_POSTGRES"

// testDSN answers the test database's DSN, or skips t.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnVariable)
	if dsn == "" {
		t.Skip("set " + dsnVariable + " to a PostgreSQL DSN (for example postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the PostgreSQL store tests")
	}
	return dsn
}

// testConns is each test pool's size: fewer connections than the suite's
// concurrent writers, so they contend for them as on a busy node.
const testConns = 4

// schemaSlots bounds the test schemas alive at once. Parallel tests run
// GOMAXPROCS at a time, and on a many-core machine that many pools would
// exceed PostgreSQL's default max_connections (100). A test uses at most
// one schema, so waiting for a slot never deadlocks.
var schemaSlots = make(chan struct{}, 8)

// newSchema creates an empty schema and answers its name, quoted as an
// identifier, taking a slot until t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := testDSN(t)
	schemaSlots <- struct{}{}
	t.Cleanup(func() { <-schemaSlots })
	return createSchema(t, dsn)
}

// createSchema creates an empty schema of a random name and answers its
// name, quoted as an identifier. t.Cleanup drops it, with everything in it; cleanups run last in,
// first out, so the pools opened on it afterwards are closed first.
func createSchema(t testing.TB, dsn string) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	name := pgx.Identifier{"tp_" + hex.EncodeToString(b)}.Sanitize()
	ctx := context.Background() // t's context is done before cleanups run
	admin := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect to %s: %v", dsnVariable, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin(`CREATE SCHEMA ` + name)
	t.Cleanup(func() { admin(`DROP SCHEMA ` + name + ` CASCADE`) })
	return name
}

// openPool answers a pool whose connections have searchPath (quoted schema
// names) as their search_path, closed by t.Cleanup.
func openPool(t testing.TB, searchPath ...string) *pgxpool.Pool {
	t.Helper()
	return openPoolMode(t, pgx.QueryExecModeCacheStatement, searchPath...)
}

// openPoolMode is openPool with the pool's query execution mode set.
func openPoolMode(t testing.TB, mode pgx.QueryExecMode, searchPath ...string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatalf("parse %s: %v", dsnVariable, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = strings.Join(searchPath, ", ")
	cfg.ConnConfig.DefaultQueryExecMode = mode
	cfg.MaxConns = testConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newTestStore answers a migrated store on a fresh schema.
func newTestStore(t testing.TB) *Store {
	t.Helper()
	s := New(openPool(t, newSchema(t)))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	testDSN(t)
	if testing.Short() {
		t.Skip("the conformance suite on PostgreSQL, a schema per case, takes minutes; it is left out of -short (the SQLite store runs it there)")
	}
	storetest.Run(t, func(t *testing.T) toolplane.Store { return newTestStore(t) })
}

// TestConformanceSimpleProtocol runs the suite on pools that send every
// statement over the simple protocol, with the arguments written into the
// text, as a pool behind a transaction-pooling proxy (PgBouncer) must.
func TestConformanceSimpleProtocol(t *testing.T) {
	t.Parallel()
	testDSN(t)
	if testing.Short() {
		t.Skip("the conformance suite over the simple protocol takes minutes; it is left out of -short")
	}
	storetest.Run(t, func(t *testing.T) toolplane.Store {
		s := New(openPoolMode(t, pgx.QueryExecModeSimpleProtocol, newSchema(t)))
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := New(openPool(t, newSchema(t)))
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
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(first) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, len(first))
	}
}

// TestMigrateConcurrently is several nodes starting at once on one empty
// schema: each has its own pool, so only the database can order them.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const nodes = 8
	stores := make([]*Store, nodes)
	for i := range stores {
		stores[i] = New(openPool(t, schema))
		// Connect now, so the Migrate calls below start together.
		if err := stores[i].pool.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			<-start
			if err := s.Migrate(t.Context()); err != nil {
				t.Errorf("node %d: concurrent Migrate: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()

	status, err := stores[0].MigrationStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range status {
		if !m.Applied {
			t.Errorf("migration %d not applied", m.Version)
		}
	}
	var rows int
	if err := stores[0].pool.QueryRow(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(status) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, len(status))
	}
	// The schema works from every node.
	for i, s := range stores {
		c := &toolplane.Claim{OrganizationID: "org", Tool: "t", Key: fmt.Sprint(i), Status: toolplane.ClaimProcessing}
		if ok, err := s.InsertClaim(t.Context(), c); !ok || err != nil {
			t.Errorf("node %d: InsertClaim = %v, %v", i, ok, err)
		}
	}
}

func TestMigrationStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := New(openPool(t, newSchema(t)))
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
	if _, err := s.pool.Exec(ctx, `INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 0)`); err != nil {
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

// TestMigrateFindsItsOwnSchema keeps Migrate and MigrationStatus on the
// schema tables are created in: a schema_migrations table further along the
// search_path (another deployment's, say) is not this schema's history.
func TestMigrateFindsItsOwnSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	migrated := newSchema(t)
	if err := New(openPool(t, migrated)).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := createSchema(t, testDSN(t))
	s := New(openPool(t, fresh, migrated))

	status, err := s.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range status {
		if m.Applied {
			t.Errorf("fresh schema reports migration %d applied", m.Version)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	err = s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_catalog.pg_tables
		WHERE schemaname = current_schema() AND tablename IN ('claims', 'schema_migrations')`).Scan(&n)
	if err != nil || n != 2 {
		t.Errorf("tables in the fresh schema = %d, %v; want claims and schema_migrations", n, err)
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

func auditEvent(org, id string, created time.Time) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{ID: id, OrganizationID: org, Tool: "crm.read", Outcome: "ok", CreatedAt: created}
}

func TestAppendAuditBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newTestStore(t)
	now := time.Now()

	ids := func(org string) []string {
		t.Helper()
		events, _, err := s.ListAudit(ctx, org, toolplane.AuditFilter{}, "", maxLimit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range events {
			out = append(out, e.ID)
		}
		return out
	}

	if err := s.AppendAuditBatch(ctx, nil); err != nil {
		t.Errorf("AppendAuditBatch(none) = %v", err)
	}

	var batch []*toolplane.AuditEvent
	for i := range 300 {
		batch = append(batch, auditEvent("org-a", fmt.Sprintf("ev-%03d", i), now.Add(time.Duration(i)*time.Microsecond)))
	}
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatalf("AppendAuditBatch = %v", err)
	}
	if got := ids("org-a"); len(got) != len(batch) || got[0] != "ev-299" || got[len(got)-1] != "ev-000" {
		t.Errorf("after the batch, %d events listed, want %d newest first", len(got), len(batch))
	}

	// A duplicate anywhere in a batch, of another event in it or of a
	// stored one, stores nothing of the batch and names the duplicate.
	if err := s.AppendAudit(ctx, auditEvent("org-b", "ev-stored", now)); err != nil {
		t.Fatal(err)
	}
	for _, dup := range []string{"ev-1", "ev-stored"} {
		batch := []*toolplane.AuditEvent{
			auditEvent("org-b", "ev-1", now), auditEvent("org-b", dup, now), auditEvent("org-b", "ev-3", now),
		}
		err := s.AppendAuditBatch(ctx, batch)
		if !errors.Is(err, toolplane.ErrExists) || !strings.Contains(err.Error(), dup) {
			t.Errorf("AppendAuditBatch(duplicating %s) = %v, want ErrExists naming it", dup, err)
		}
	}
	if got := ids("org-b"); len(got) != 1 || got[0] != "ev-stored" {
		t.Errorf("after the failed batches, org-b holds %v, want only ev-stored", got)
	}
}

func TestCursorRefusedByAnotherList(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	for i := range 2 {
		if err := s.AppendAudit(ctx, auditEvent("org", string(rune('a'+i)), time.Now())); err != nil {
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

// TestCursorPartsTextColumnsCannotHold refuses, as malformed, cursors whose
// tool or ID part no PostgreSQL text value holds, before any query; a key
// part holds any byte.
func TestCursorPartsTextColumnsCannotHold(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	for _, bad := range []string{"a\x00b", "\xff"} {
		if _, _, err := s.ListClaims(ctx, "org", toolplane.ClaimProcessing, cursor.Encode(cursor.Claims, 0, bad, "k"), 10); !errors.Is(err, errCursor) {
			t.Errorf("ListClaims(tool %q) err = %v, want errCursor", bad, err)
		}
		if _, _, err := s.ListApprovals(ctx, "org", toolplane.ApprovalPending, cursor.Encode(cursor.Approvals, 0, bad), 10); !errors.Is(err, errCursor) {
			t.Errorf("ListApprovals(id %q) err = %v, want errCursor", bad, err)
		}
		if _, _, err := s.ListAudit(ctx, "org", toolplane.AuditFilter{}, cursor.Encode(cursor.Audit, 0, bad), 10); !errors.Is(err, errCursor) {
			t.Errorf("ListAudit(id %q) err = %v, want errCursor", bad, err)
		}
	}
	if _, _, err := s.ListClaims(ctx, "org", toolplane.ClaimProcessing, cursor.Encode(cursor.Claims, 0, "tool", "\x00\xff"), 10); err != nil {
		t.Errorf("ListClaims(key with any byte) err = %v", err)
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

// TestCursorsMatchSQLite holds the two backends to one cursor encoding: the
// same rows page to the same cursors, and a cursor from either store
// continues the listing on the other.
func TestCursorsMatchSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := newTestStore(t)
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "toolplane.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lite := sqlite.New(db)
	if err := lite.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	stores := []toolplane.Store{pg, lite}

	created := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	for _, s := range stores {
		for i, k := range []string{"3:\x00\xff\xfe", "k-b", "k-a"} {
			c := &toolplane.Claim{OrganizationID: "org", Tool: "crm.write", Key: k, Status: toolplane.ClaimProcessing,
				CreatedAt: created.Add(time.Duration(i/2) * time.Second)}
			if _, err := s.InsertClaim(ctx, c); err != nil {
				t.Fatal(err)
			}
			a := &toolplane.Approval{OrganizationID: "org", ID: fmt.Sprintf("apr-%d", i), Key: k, Status: toolplane.ApprovalPending,
				CreatedAt: created.Add(time.Duration(i/2) * time.Second)}
			if err := s.InsertApproval(ctx, a); err != nil {
				t.Fatal(err)
			}
			if err := s.AppendAudit(ctx, auditEvent("org", fmt.Sprintf("ev-%d", i), created.Add(time.Duration(i/2)*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
	}

	// page answers a list's first page's cursor on s, and the next page
	// after cursor.
	lists := []struct {
		name string
		page func(s toolplane.Store, after string) (string, []string, error)
	}{
		{"claims", func(s toolplane.Store, after string) (string, []string, error) {
			rows, next, err := s.ListClaims(ctx, "org", toolplane.ClaimProcessing, after, 1)
			var keys []string
			for _, r := range rows {
				keys = append(keys, r.Key)
			}
			return next, keys, err
		}},
		{"approvals", func(s toolplane.Store, after string) (string, []string, error) {
			rows, next, err := s.ListApprovals(ctx, "org", toolplane.ApprovalPending, after, 1)
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			return next, ids, err
		}},
		{"audit", func(s toolplane.Store, after string) (string, []string, error) {
			rows, next, err := s.ListAudit(ctx, "org", toolplane.AuditFilter{}, after, 1)
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			return next, ids, err
		}},
	}
	for _, l := range lists {
		t.Run(l.name, func(t *testing.T) {
			var cursors [2][]string
			var rows [2][]string
			for i, s := range stores {
				after := ""
				for {
					next, ids, err := l.page(s, after)
					if err != nil {
						t.Fatal(err)
					}
					rows[i] = append(rows[i], ids...)
					if next == "" {
						break
					}
					cursors[i] = append(cursors[i], next)
					after = next
				}
			}
			if fmt.Sprintf("%q", cursors[0]) != fmt.Sprintf("%q", cursors[1]) {
				t.Errorf("cursors differ:\npostgres %q\nsqlite   %q", cursors[0], cursors[1])
			}
			if fmt.Sprintf("%q", rows[0]) != fmt.Sprintf("%q", rows[1]) {
				t.Errorf("order differs:\npostgres %q\nsqlite   %q", rows[0], rows[1])
			}
			// A cursor from one store continues the listing on the other.
			for i, s := range stores {
				_, ids, err := l.page(s, cursors[1-i][0])
				if err != nil || len(ids) != 1 || ids[0] != rows[i][1] {
					t.Errorf("store %d after the other's first cursor = %q, %v; want %q", i, ids, err, rows[i][1])
				}
			}
		})
	}
}

// TestQueriesUseIndexes keeps the list and lookup queries off full table
// scans and sorts, which would pass every functional test and fail in
// production. Sequential scans and sorts are priced out for the test, so a
// plan with either is one no index serves.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	k := []byte("k")
	tests := []struct {
		name, query string
		args        []any
	}{
		{"GetClaim", `SELECT * FROM claims WHERE organization_id = $1 AND tool = $2 AND key = $3`, []any{"o", "t", k}},
		{"ListClaims page", `SELECT * FROM claims WHERE organization_id = $1 AND status = $2 AND (created_at, tool, key) > ($3, $4, $5) ORDER BY created_at, tool, key LIMIT 10`, []any{"o", "s", 0, "t", k}},
		{"FindApprovals", `SELECT * FROM approvals WHERE organization_id = $1 AND run_id = $2 AND key = $3 ORDER BY created_at DESC, id DESC`, []any{"o", "r", k}},
		{"FindOpenApprovals", `SELECT * FROM approvals WHERE organization_id = $1 AND principal_id = $2 AND tool = $3 AND arguments_hash = $4 AND status IN ('pending', 'approved') AND expires_at > $5 ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "p", "t", []byte("h"), 0}},
		{"ListApprovals page", `SELECT * FROM approvals WHERE organization_id = $1 AND status = $2 AND (created_at, id) > ($3, $4) ORDER BY created_at, id LIMIT 10`, []any{"o", "s", 0, "i"}},
		{"RunTreeCost", `SELECT COALESCE(SUM(cost_cents), 0) FROM usage WHERE organization_id = $1 AND root_run_id = $2`, []any{"o", "r"}},
		{"ListAudit page", `SELECT * FROM audit_events WHERE organization_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", 0, "i"}},
		{"ListAudit by run", `SELECT * FROM audit_events WHERE organization_id = $1 AND run_id = $2 ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "r"}},
		{"ExpiredClaims", `SELECT * FROM claims WHERE status = 'processing' AND lease_until < $1 ORDER BY lease_until LIMIT 10`, []any{0}},
		{"DeleteCompletedClaims", `DELETE FROM claims WHERE status = 'completed' AND updated_at < $1 AND (organization_id, tool, key) IN (
			SELECT organization_id, tool, key FROM claims WHERE status = 'completed' AND updated_at < $1 LIMIT $2)`, []any{0, 10}},
		{"ApprovedApprovals", `SELECT * FROM approvals WHERE status = 'approved' AND resolved_at >= $1 ORDER BY resolved_at LIMIT 10`, []any{0}},
		{"ListToolVersions page", `SELECT * FROM tool_versions WHERE organization_id = $1 AND (name, published_at, seq) > ($2, $3, $4) ORDER BY name, published_at, seq LIMIT 10`, []any{"o", "n", 0, 0}},
		{"ListToolVersions by owner", `SELECT * FROM tool_versions WHERE organization_id = $1 AND owner = $2 ORDER BY name, published_at, seq LIMIT 10`, []any{"o", "w"}},
		{"ListEveryToolVersion page", `SELECT * FROM tool_versions WHERE (organization_id, name, published_at, seq) > ($1, $2, $3, $4) ORDER BY organization_id, name, published_at, seq LIMIT 10`, []any{"o", "n", 0, 0}},
		{"OrphanedClaims", `SELECT * FROM claims WHERE status = 'processing' AND node IN (SELECT id FROM nodes WHERE heartbeat_at < $1) LIMIT $2`, []any{0, 10}},
		{"DeleteDeadNodes", `DELETE FROM nodes WHERE id IN (SELECT id FROM nodes n WHERE heartbeat_at < $1
			AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.node = n.id AND c.status = 'processing') LIMIT $2)`, []any{0, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off`); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(plan, "; ")
			if !strings.Contains(joined, "Index") || strings.Contains(joined, "Seq Scan") || strings.Contains(joined, "Sort") {
				t.Errorf("plan %q: want an index search without a sort", joined)
			}
		})
	}
}

func TestMaintenance(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newTestStore(t)
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

	claim := func(org, key string, status toolplane.ClaimStatus, lease, updated time.Time) {
		t.Helper()
		c := &toolplane.Claim{OrganizationID: org, Tool: "crm.write", Key: key, Status: status,
			LeaseUntil: lease, CreatedAt: now.Add(-time.Hour), UpdatedAt: updated}
		if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatalf("InsertClaim(%s) = %v, %v", key, ok, err)
		}
	}
	// Two organizations, so the sweeps are seen to cross them.
	claim("org-a", "expired-2", toolplane.ClaimProcessing, now.Add(-time.Minute), now)
	claim("org-b", "expired-1", toolplane.ClaimProcessing, now.Add(-time.Hour), now)
	claim("org-a", "leased", toolplane.ClaimProcessing, now.Add(time.Minute), now)
	claim("org-a", "at-now", toolplane.ClaimProcessing, now, now)
	claim("org-a", "no-lease", toolplane.ClaimProcessing, time.Time{}, now)
	claim("org-a", "uncertain", toolplane.ClaimUncertain, now.Add(-time.Hour), now)
	claim("org-a", "done-old", toolplane.ClaimCompleted, time.Time{}, now.Add(-48*time.Hour))
	claim("org-b", "done-older", toolplane.ClaimCompleted, time.Time{}, now.Add(-72*time.Hour))
	claim("org-b", "done-new", toolplane.ClaimCompleted, time.Time{}, now)

	keys := func(cs []toolplane.Claim) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.OrganizationID+"/"+c.Key)
		}
		return strings.Join(out, " ")
	}
	expired, err := s.ExpiredClaims(ctx, now, 10)
	if got, want := keys(expired), "org-b/expired-1 org-a/expired-2"; err != nil || got != want {
		t.Errorf("ExpiredClaims = %q, %v; want %q", got, err, want)
	}
	expired, err = s.ExpiredClaims(ctx, now, 1)
	if got, want := keys(expired), "org-b/expired-1"; err != nil || got != want {
		t.Errorf("ExpiredClaims(limit 1) = %q, %v; want %q", got, err, want)
	}

	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 1); n != 1 || err != nil {
		t.Errorf("DeleteCompletedClaims(limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 10); n != 1 || err != nil {
		t.Errorf("DeleteCompletedClaims = %d, %v; want the other 1", n, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 10); n != 0 || err != nil {
		t.Errorf("DeleteCompletedClaims again = %d, %v; want 0", n, err)
	}
	for _, k := range []string{"done-old", "done-older"} {
		for _, org := range []string{"org-a", "org-b"} {
			if _, err := s.GetClaim(ctx, org, "crm.write", k); !errors.Is(err, toolplane.ErrNotFound) {
				t.Errorf("GetClaim(%s/%s) after the sweep = %v, want ErrNotFound", org, k, err)
			}
		}
	}
	if _, err := s.GetClaim(ctx, "org-b", "crm.write", "done-new"); err != nil {
		t.Errorf("the sweep removed a claim inside retention: %v", err)
	}

	approval := func(org, id string, status toolplane.ApprovalStatus, resolved time.Time) {
		t.Helper()
		a := &toolplane.Approval{OrganizationID: org, ID: id, Status: status, CreatedAt: now.Add(-time.Hour), ResolvedAt: resolved}
		if err := s.InsertApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	approval("org-a", "apr-2", toolplane.ApprovalApproved, now)
	approval("org-b", "apr-1", toolplane.ApprovalApproved, now.Add(-time.Minute))
	approval("org-a", "apr-old", toolplane.ApprovalApproved, now.Add(-time.Hour))
	approval("org-a", "apr-rejected", toolplane.ApprovalRejected, now)
	approval("org-a", "apr-pending", toolplane.ApprovalPending, time.Time{})
	approved, err := s.ApprovedApprovals(ctx, now.Add(-time.Minute), 10)
	var ids []string
	for _, a := range approved {
		ids = append(ids, a.OrganizationID+"/"+a.ID)
	}
	if got, want := strings.Join(ids, " "), "org-b/apr-1 org-a/apr-2"; err != nil || got != want {
		t.Errorf("ApprovedApprovals = %q, %v; want %q", got, err, want)
	}

	for _, limit := range []int{0, maxLimit + 1} {
		if _, err := s.ExpiredClaims(ctx, now, limit); !errors.Is(err, errLimit) {
			t.Errorf("ExpiredClaims(limit %d) err = %v, want errLimit", limit, err)
		}
		if _, err := s.DeleteCompletedClaims(ctx, now, limit); !errors.Is(err, errLimit) {
			t.Errorf("DeleteCompletedClaims(limit %d) err = %v, want errLimit", limit, err)
		}
		if _, err := s.ApprovedApprovals(ctx, now, limit); !errors.Is(err, errLimit) {
			t.Errorf("ApprovedApprovals(limit %d) err = %v, want errLimit", limit, err)
		}
	}

	// Node instances: OrphanedClaims answers the processing claims of the
	// dead ones (silent, or retired at the epoch) and DeleteDeadNodes
	// removes a dead instance only once it holds no processing claim, so
	// a claim being decided never loses its holder's row.
	node := func(id string, heartbeat time.Time) {
		t.Helper()
		if err := s.InsertNode(ctx, &toolplane.Node{ID: id, Name: id, StartedAt: now.Add(-3 * time.Hour), HeartbeatAt: heartbeat}); err != nil {
			t.Fatal(err)
		}
	}
	held := func(key, node string, status toolplane.ClaimStatus) {
		t.Helper()
		c := &toolplane.Claim{OrganizationID: "org-n", Tool: "crm.write", Key: key, Status: status,
			Node: node, CreatedAt: now.Add(-time.Hour), UpdatedAt: now}
		if ok, err := s.InsertClaim(ctx, c); !ok || err != nil {
			t.Fatalf("InsertClaim(%s) = %v, %v", key, ok, err)
		}
	}
	node("dead-busy", now.Add(-2*time.Hour))
	node("dead-idle", now.Add(-2*time.Hour))
	node("alive", now)
	node("retired", now)
	node("retired-successor", now)
	if _, err := s.RetireNodes(ctx, "retired", "retired-successor"); err != nil {
		t.Fatal(err)
	}
	held("held-dead", "dead-busy", toolplane.ClaimProcessing)
	held("done-dead", "dead-busy", toolplane.ClaimCompleted)
	held("done-idle", "dead-idle", toolplane.ClaimCompleted)
	held("uncertain-idle", "dead-idle", toolplane.ClaimUncertain)
	held("held-alive", "alive", toolplane.ClaimProcessing)
	held("held-retired", "retired", toolplane.ClaimProcessing)

	orphaned, err := s.OrphanedClaims(ctx, now.Add(-time.Minute), 10)
	got := strings.Fields(keys(orphaned))
	slices.Sort(got)
	if want := []string{"org-n/held-dead", "org-n/held-retired"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("OrphanedClaims = %v, %v; want %v", got, err, want)
	}
	if n, err := s.DeleteDeadNodes(ctx, now.Add(-time.Minute), 10); n != 1 || err != nil {
		t.Errorf("DeleteDeadNodes = %d, %v; want 1 (dead-idle)", n, err)
	}
	for id, wantKept := range map[string]bool{"dead-busy": true, "dead-idle": false, "alive": true, "retired": true} {
		_, err := s.GetNode(ctx, id)
		if kept := err == nil; kept != wantKept || (!kept && !errors.Is(err, toolplane.ErrNotFound)) {
			t.Errorf("GetNode(%s) after DeleteDeadNodes = %v; want kept %v", id, err, wantKept)
		}
	}
	// Once its claim is decided, the dead instance goes too.
	c, err := s.GetClaim(ctx, "org-n", "crm.write", "held-dead")
	if err != nil {
		t.Fatal(err)
	}
	c.Status = toolplane.ClaimUncertain
	if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
		t.Fatalf("UpdateClaim(held-dead) = %v, %v", ok, err)
	}
	if n, err := s.DeleteDeadNodes(ctx, now.Add(-time.Minute), 10); n != 1 || err != nil {
		t.Errorf("DeleteDeadNodes after the claim was decided = %d, %v; want 1 (dead-busy)", n, err)
	}
	// A retired instance removed by retention stays gone: its late
	// heartbeat does not store it again.
	c, err = s.GetClaim(ctx, "org-n", "crm.write", "held-retired")
	if err != nil {
		t.Fatal(err)
	}
	c.Status = toolplane.ClaimUncertain
	if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
		t.Fatalf("UpdateClaim(held-retired) = %v, %v", ok, err)
	}
	if n, err := s.DeleteDeadNodes(ctx, now.Add(-time.Minute), 10); n != 1 || err != nil {
		t.Errorf("DeleteDeadNodes after the retired instance's claim was decided = %d, %v; want 1", n, err)
	}
	if err := s.Heartbeat(ctx, &toolplane.Node{ID: "retired", Name: "retired", StartedAt: now.Add(-3 * time.Hour), HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GetNode(ctx, "retired"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetNode(retired) after retention and a late heartbeat = %v, %v; want ErrNotFound", n, err)
	}
	for _, limit := range []int{0, maxLimit + 1} {
		if _, err := s.OrphanedClaims(ctx, now, limit); !errors.Is(err, errLimit) {
			t.Errorf("OrphanedClaims(limit %d) err = %v, want errLimit", limit, err)
		}
		if _, err := s.DeleteDeadNodes(ctx, now, limit); !errors.Is(err, errLimit) {
			t.Errorf("DeleteDeadNodes(limit %d) err = %v, want errLimit", limit, err)
		}
	}
}

// TestMigrationMovesVersionsToTheDefaultOrganization upgrades a database
// that holds versions from before the catalogue had organizations: each is
// the "default" organization's afterwards, whole, and another organization
// may then publish the same version.
func TestMigrationMovesVersionsToTheDefaultOrganization(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := New(openPool(t, newSchema(t)))
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version < 3 {
			if err := s.apply(ctx, m); err != nil {
				t.Fatalf("apply %04d: %v", m.Version, err)
			}
		}
	}
	for i, version := range []string{"1.0.0", "1.1.0"} {
		if _, err := s.pool.Exec(ctx, `INSERT INTO tool_versions (name, version, state, definition, schema_hash, owner,
			review_reasons, published_by, published_at, reviewed_by, review_note, replacement, retire_blocked, revision, updated_at)
			VALUES ('payments.refund', $1, 'active', '\x7b7d', 'sha256:x', 'payments', '{destructive}', 'olga', $2, 'ada', '', '', '', 3, $3)`,
			version, 1_000+i, 2_000+i); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.CatalogRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if after, err := s.CatalogRevision(ctx); err != nil || after <= before {
		t.Errorf("CatalogRevision after the migration = %d, %v; want it grown from %d", after, err, before)
	}
	got, _, err := s.ListToolVersions(ctx, "default", toolplane.VersionFilter{}, "", 10)
	if err != nil || len(got) != 2 || got[0].Version != "1.0.0" || got[1].Version != "1.1.0" {
		t.Fatalf("ListToolVersions(default) = %+v, %v; want both versions in publication order", got, err)
	}
	if v := got[0]; v.OrganizationID != "default" || v.State != toolplane.StateActive || string(v.Definition) != "{}" ||
		v.Revision != 3 || len(v.ReviewReasons) != 1 || v.PublishedBy != "olga" {
		t.Errorf("migrated version = %+v", v)
	}
	if _, err := s.GetToolVersion(ctx, "other", "payments.refund", "1.0.0"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetToolVersion(other) = %v, want ErrNotFound", err)
	}
	v := got[0]
	v.OrganizationID = "other"
	if err := s.InsertToolVersion(ctx, &v); err != nil {
		t.Fatalf("InsertToolVersion(other) = %v", err)
	}
	// Every insert names its organization: the column keeps no default.
	if _, err := s.pool.Exec(ctx, `INSERT INTO tool_versions (name, version, state, schema_hash, owner, review_reasons,
		published_by, published_at, reviewed_by, review_note, replacement, retire_blocked, revision, updated_at)
		VALUES ('x', '1.0.0', 'active', '', '', '{}', '', 0, '', '', '', '', 0, 0)`); err == nil {
		t.Error("an insert without an organization was stored")
	}
}
