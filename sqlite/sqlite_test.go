package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
		{"wal_autocheckpoint", strconv.Itoa(autocheckpointPages)},
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

// TestOpenFilesArePrivate: the database and its -wal and -shm files hold
// credential hashes and the audit trail, so only their owner reads them,
// whether Open creates them or finds them left readable by others.
func TestOpenFilesArePrivate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"new file", func(*testing.T, string) {}},
		{"readable by others", func(t *testing.T, path string) {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "toolplane.db")
			tt.prepare(t, path)
			db, err := Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := New(db).Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if perm := info.Mode().Perm(); perm != 0o600 {
					t.Errorf("%s mode = %v, want 0600", filepath.Base(p), perm)
				}
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
		{"FindOpenApprovals", `SELECT * FROM approvals WHERE organization_id = ? AND principal_id = ? AND tool = ? AND arguments_hash = ? AND status IN ('pending', 'approved') AND expires_at > ? ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "p", "t", "h", 0}},
		{"ListApprovals page", `SELECT * FROM approvals WHERE organization_id = ? AND status = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT 10`, []any{"o", "s", 0, "i"}},
		{"RunTreeCost", `SELECT COALESCE(SUM(cost_cents), 0) FROM usage WHERE organization_id = ? AND root_run_id = ?`, []any{"o", "r"}},
		{"ListAudit page", `SELECT * FROM audit_events WHERE organization_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", 0, "i"}},
		{"ListAudit by run", `SELECT * FROM audit_events WHERE organization_id = ? AND run_id = ? ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "r"}},
		{"ExpiredClaims", `SELECT * FROM claims WHERE status = 'processing' AND lease_until < ? ORDER BY lease_until LIMIT 10`, []any{0}},
		{"DeleteCompletedClaims", `SELECT rowid FROM claims WHERE status = 'completed' AND updated_at < ? LIMIT 10`, []any{0}},
		{"ApprovedApprovals", `SELECT * FROM approvals WHERE status = 'approved' AND resolved_at >= ? ORDER BY resolved_at LIMIT 10`, []any{0}},
		{"ListToolVersions page", `SELECT * FROM tool_versions WHERE organization_id = ? AND (name, published_at, seq) > (?, ?, ?) ORDER BY name, published_at, seq LIMIT 10`, []any{"o", "n", 0, 0}},
		{"ListToolVersions by owner", `SELECT * FROM tool_versions WHERE organization_id = ? AND owner = ? ORDER BY name, published_at, seq LIMIT 10`, []any{"o", "w"}},
		{"ListEveryToolVersion page", `SELECT * FROM tool_versions WHERE (organization_id, name, published_at, seq) > (?, ?, ?, ?) ORDER BY organization_id, name, published_at, seq LIMIT 10`, []any{"o", "n", 0, 0}},
		{"OrphanedClaims", `SELECT * FROM claims WHERE status = 'processing' AND node IN (SELECT id FROM nodes WHERE heartbeat_at < ?) LIMIT 10`, []any{0}},
		{"DeleteDeadNodes", `DELETE FROM nodes WHERE id IN (SELECT id FROM nodes n WHERE heartbeat_at < ? AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.node = n.id AND c.status = 'processing') LIMIT 10)`, []any{0}},
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
			// A SCAN step reads a whole table or index, however it is
			// ordered: each step must be a SEARCH.
			if !strings.Contains(joined, "USING") || strings.Contains(joined, "SCAN ") || strings.Contains(joined, "TEMP B-TREE") {
				t.Errorf("plan %q: want index searches without a scan or a sort", joined)
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
	// Claims that reached their state by an update, not an insert: the
	// sweeps' indexes hold one state each, and an update moves a claim in
	// and out of them.
	claim("org-a", "expired-later", toolplane.ClaimProcessing, now.Add(time.Minute), now)
	claim("org-a", "done-later", toolplane.ClaimProcessing, now.Add(time.Minute), now)
	update := func(key string, change func(*toolplane.Claim)) {
		t.Helper()
		c, err := s.GetClaim(ctx, "org-a", "crm.write", key)
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		if ok, err := s.UpdateClaim(ctx, c); !ok || err != nil {
			t.Fatalf("UpdateClaim(%s) = %v, %v", key, ok, err)
		}
	}
	update("expired-later", func(c *toolplane.Claim) { c.LeaseUntil = now.Add(-30 * time.Minute) })
	update("expired-later", func(c *toolplane.Claim) { c.Dispatched, c.Attempts = true, 1 })
	update("done-later", func(c *toolplane.Claim) {
		c.Status, c.LeaseUntil, c.UpdatedAt = toolplane.ClaimCompleted, time.Time{}, now.Add(-96*time.Hour)
	})
	update("leased", func(c *toolplane.Claim) { c.Dispatched, c.Attempts = true, 1 })

	keys := func(cs []toolplane.Claim) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.OrganizationID+"/"+c.Key)
		}
		return strings.Join(out, " ")
	}
	expired, err := s.ExpiredClaims(ctx, now, 10)
	if got, want := keys(expired), "org-b/expired-1 org-a/expired-later org-a/expired-2"; err != nil || got != want {
		t.Errorf("ExpiredClaims = %q, %v; want %q", got, err, want)
	}
	expired, err = s.ExpiredClaims(ctx, now, 1)
	if got, want := keys(expired), "org-b/expired-1"; err != nil || got != want {
		t.Errorf("ExpiredClaims(limit 1) = %q, %v; want %q", got, err, want)
	}

	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 1); n != 1 || err != nil {
		t.Errorf("DeleteCompletedClaims(limit 1) = %d, %v; want 1", n, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 10); n != 2 || err != nil {
		t.Errorf("DeleteCompletedClaims = %d, %v; want the other 2", n, err)
	}
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-24*time.Hour), 10); n != 0 || err != nil {
		t.Errorf("DeleteCompletedClaims again = %d, %v; want 0", n, err)
	}
	for _, k := range []string{"done-old", "done-older", "done-later"} {
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
// the "default" organization's afterwards, whole, and a later insert needs
// its organization.
func TestMigrationMovesVersionsToTheDefaultOrganization(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := New(openTest(t))
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, createMigrationsTable); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version < 4 {
			if err := s.apply(ctx, m); err != nil {
				t.Fatalf("apply %04d: %v", m.Version, err)
			}
		}
	}
	for i, version := range []string{"1.0.0", "1.1.0"} {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO tool_versions (name, version, state, definition, schema_hash, owner,
			review_reasons, published_by, published_at, reviewed_by, review_note, replacement, retire_blocked, revision, updated_at)
			VALUES ('payments.refund', ?, 'active', X'7B7D', 'sha256:x', 'payments', '["destructive"]', 'olga', ?, 'ada', '', '', '', 3, ?)`,
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
	// The key now holds the organization: another organization publishes
	// the same version, and the insertion order keeps rising past the old.
	v := got[0]
	v.OrganizationID = "other"
	if err := s.InsertToolVersion(ctx, &v); err != nil {
		t.Fatalf("InsertToolVersion(other) = %v", err)
	}
	var seq int64
	if err := s.db.QueryRowContext(ctx, `SELECT seq FROM tool_versions WHERE organization_id = 'other'`).Scan(&seq); err != nil || seq != 3 {
		t.Errorf("seq of the new row = %d, %v; want 3", seq, err)
	}
}
