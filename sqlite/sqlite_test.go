package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
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

func TestMaintenance(t *testing.T) {
	t.Parallel()
	storetest.RunMaintenance(t, func(t *testing.T) storetest.MaintenanceStore { return newTestStore(t) }, sqlstore.ErrLimit)
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	embedded, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	db := func(s storetest.MigratingStore) *sql.DB { return s.(*Store).db }
	storetest.RunMigrations(t, storetest.Migrations{
		Embedded: embedded,
		Open:     func(t *testing.T) storetest.MigratingStore { return New(openTest(t)) },
		// Stores of one process share its pool: SQLite takes one writer at
		// a time whichever connection it comes from.
		Reopen: func(t *testing.T, s storetest.MigratingStore) storetest.MigratingStore { return New(db(s)) },
		Exec: func(t *testing.T, s storetest.MigratingStore, statement string) {
			t.Helper()
			if _, err := db(s).ExecContext(t.Context(), statement); err != nil {
				t.Fatalf("%s: %v", statement, err)
			}
		},
		Count: func(t *testing.T, s storetest.MigratingStore, query string) int {
			t.Helper()
			var n int
			if err := db(s).QueryRowContext(t.Context(), query).Scan(&n); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			return n
		},
		Before: func(t *testing.T, version int) storetest.MigratingStore {
			t.Helper()
			s := New(openTest(t))
			if _, err := s.db.ExecContext(t.Context(), createMigrationsTable); err != nil {
				t.Fatal(err)
			}
			for _, m := range embedded {
				if m.Version < version {
					if err := s.apply(t.Context(), m); err != nil {
						t.Fatalf("apply %04d: %v", m.Version, err)
					}
				}
			}
			return s
		},
		BeforeCatalogOrganizations: func(t *testing.T) storetest.MigratingStore {
			t.Helper()
			ctx := t.Context()
			s := New(openTest(t))
			if _, err := s.db.ExecContext(ctx, createMigrationsTable); err != nil {
				t.Fatal(err)
			}
			for _, m := range embedded {
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
			return s
		},
		// The insertion order keeps rising past the versions migrated.
		AfterCatalogOrganizations: func(t *testing.T, s storetest.MigratingStore) {
			t.Helper()
			var seq int64
			if err := db(s).QueryRowContext(t.Context(), `SELECT seq FROM tool_versions WHERE organization_id = 'other'`).Scan(&seq); err != nil || seq != 3 {
				t.Errorf("seq of the new row = %d, %v; want 3", seq, err)
			}
		},
	})
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

// TestOpenKeepsConnectionsOfConcurrentReads: connections held at once by
// as many reads as a node serves calls go back to the pool, not closed, so
// the next reads do not reopen them and prepare their statements anew.
func TestOpenKeepsConnectionsOfConcurrentReads(t *testing.T) {
	t.Parallel()
	db := openTest(t)
	const n = 20
	readAtOnce(t, db, n, "")
	if st := db.Stats(); st.Idle != n || st.MaxIdleClosed != 0 {
		t.Errorf("after %d reads at once the pool keeps %d idle connections and closed %d, want %d kept", n, st.Idle, st.MaxIdleClosed, n)
	}
}

// TestOpenClosesIdleConnections: the connections a burst of reads opened
// are closed once unused for the pool's idle time, and a write committed
// through them is there when the store reads again on a connection opened
// afresh, its statements prepared anew.
func TestOpenClosesIdleConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const idle = 200 * time.Millisecond
	db, err := open(ctx, filepath.Join(t.TempDir(), "toolplane.db"), idle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := New(db)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	claim := &toolplane.Claim{
		OrganizationID: "org-1", Tool: "payments.refund_order", Key: "k-1",
		RequestHash: "sha256:00", Status: toolplane.ClaimProcessing, Owner: "node-1",
		LeaseUntil: now.Add(time.Minute), Arguments: []byte(`{"amount_cents":1250}`),
		Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	if ok, err := s.InsertClaim(ctx, claim); err != nil || !ok {
		t.Fatalf("InsertClaim = %v, %v", ok, err)
	}
	const n = 8
	readAtOnce(t, db, n, "")
	if st := db.Stats(); st.Idle != n {
		t.Fatalf("after %d reads at once the pool keeps %d idle connections, want %d", n, st.Idle, n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().OpenConnections > 0 {
		if time.Now().After(deadline) {
			st := db.Stats()
			t.Fatalf("%v after their last use the pool still holds %d connections (%d closed for idleness)", 10*time.Second, st.OpenConnections, st.MaxIdleTimeClosed)
		}
		time.Sleep(idle / 4)
	}
	if st := db.Stats(); st.MaxIdleTimeClosed < n {
		t.Errorf("closed for idleness: %d connections, want at least %d", st.MaxIdleTimeClosed, n)
	}
	got, err := s.GetClaim(ctx, claim.OrganizationID, claim.Tool, claim.Key)
	if err != nil {
		t.Fatalf("GetClaim after the pool closed its connections: %v", err)
	}
	if got.Status != claim.Status || string(got.Arguments) != string(claim.Arguments) {
		t.Errorf("claim read back = %+v, want %+v", got, claim)
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

// TestQueriesUseIndexes keeps the list and lookup queries off full table
// scans, which would pass every functional test and fail in production.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	// The uncertain claims' list as the store writes it, after a cursor:
	// the key compared and ordered as its text (migration 0051).
	var claimsPage sqlstore.Query
	derived := "3:run,7:agent-1,5:run-1,5:agent,64:" + strings.Repeat("0123456789abcdef", 4)
	if err := sqlstore.ListClaims(&claimsPage, dialect, "o", toolplane.ClaimUncertain,
		sqlstore.ClaimCursor(&toolplane.Claim{Tool: "t", Key: derived}), 10); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, query string
		args        []any
	}{
		{"GetClaim", `SELECT * FROM claims WHERE organization_id = ? AND tool = ? AND key = ?`, []any{"o", "t", "k"}},
		// A derived key is bound in its stored form, a BLOB.
		{"GetClaim derived", `SELECT ` + claimSelect + ` FROM claims WHERE organization_id = ? AND tool = ? AND key = ?`, []any{"o", "t", claimKey(derived)}},
		{"ListClaims page", claimsPage.String(), claimsPage.Args()},
		{"FindApprovals", `SELECT * FROM approvals WHERE organization_id = ? AND tool = ? AND key = ? ORDER BY created_at DESC, id DESC`, []any{"o", "t", "k"}},
		{"FileApproval pending", `SELECT * FROM approvals WHERE organization_id = ? AND tool = ? AND key = ? AND status = 'pending'`, []any{"o", "t", "k"}},
		{"FindOpenApprovals", `SELECT * FROM approvals WHERE organization_id = ? AND principal_id = ? AND tool = ? AND arguments_hash = ? AND status IN ('pending', 'approved') AND expires_at > ? ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "p", "t", "h", 0}},
		{"ListApprovals page", `SELECT * FROM approvals WHERE organization_id = ? AND status = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT 10`, []any{"o", "s", 0, "i"}},
		{"RunTreeCost", `SELECT COALESCE(SUM(cost_cents), 0) FROM usage WHERE organization_id = ? AND root_run_id = ?`, []any{"o", "r"}},
		{"ToolUsage", `SELECT cost_cents FROM usage WHERE organization_id = ? AND tool = ? AND created_at >= ? ORDER BY created_at DESC LIMIT 1000`, []any{"o", "t", 0}},
		{"ListAudit page", `SELECT * FROM audit_events WHERE organization_id = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", 0, "i"}},
		{"ListAudit by run", `SELECT * FROM audit_events WHERE organization_id = ? AND run_id = ? ORDER BY created_at DESC, id DESC LIMIT 10`, []any{"o", "r"}},
		{"ExpiredClaims", `SELECT * FROM claims WHERE status = 'processing' AND lease_until < ? ORDER BY lease_until LIMIT 10`, []any{0}},
		{"DeleteCompletedClaims", `SELECT rowid FROM claims WHERE status = 'completed' AND updated_at < ? LIMIT 10`, []any{0}},
		{"ApprovedApprovals", `SELECT * FROM approvals WHERE status = 'approved' AND resolved_at >= ? ORDER BY resolved_at LIMIT 10`, []any{0}},
		{"ListToolVersions page", `SELECT * FROM tool_versions WHERE organization_id = ? AND (name, published_at, seq) > (?, ?, ?) ORDER BY name, published_at, seq LIMIT 10`, []any{"o", "n", 0, 0}},
		{"ListToolVersions by owner", `SELECT * FROM tool_versions WHERE organization_id = ? AND owner = ? ORDER BY name, published_at, seq LIMIT 10`, []any{"o", "w"}},
		{"ListEveryToolVersion page", `SELECT * FROM tool_versions WHERE (organization_id, name, published_at, seq) > (?, ?, ?, ?) ORDER BY organization_id, name, published_at, seq LIMIT 10`, []any{"o", "n", 0, 0}},
		{"OrphanedClaims", `SELECT * FROM claims WHERE status = 'processing' AND node IN (SELECT id FROM nodes WHERE heartbeat_at < ?) LIMIT 10`, []any{0}},
		// The bounded counts of the console's navigation: their inner
		// reads (the outer COUNT runs over at most the bound's rows).
		{"CountOrgClaims", `SELECT 1 FROM claims WHERE organization_id = ? AND status = ? AND status = 'uncertain' LIMIT 51`, []any{"o", "uncertain"}},
		{"CountAnomalies", `SELECT 1 FROM anomalies WHERE organization_id = ? AND status = ? LIMIT 51`, []any{"o", "open"}},
		{"DeleteDeadNodes", `DELETE FROM nodes WHERE id IN (SELECT id FROM nodes n WHERE heartbeat_at < ? AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.node = n.id AND c.status = 'processing') LIMIT 10)`, []any{0}},
	}
	// The audit trail's indexes by time (audit_events_traffic) and by run
	// order by time, and the rows of one microsecond are ordered by id
	// from the rows read: the indexes do not hold the id (migration 0049).
	sortsTies := map[string]bool{"ListAudit page": true, "ListAudit by run": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			joined := queryPlan(t, s, tt.query, tt.args...)
			if sortsTies[tt.name] {
				joined = strings.Replace(joined, "; USE TEMP B-TREE FOR LAST TERM OF ORDER BY", "", 1)
			}
			// A SCAN step reads a whole table or index, however it is
			// ordered: each step must be a SEARCH.
			if !strings.Contains(joined, "USING") || strings.Contains(joined, "SCAN ") || strings.Contains(joined, "TEMP B-TREE") {
				t.Errorf("plan %q: want index searches without a scan or a sort", joined)
			}
		})
	}
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	storetest.RunNotifications(t, func(t *testing.T) storetest.NotificationStore { return newTestStore(t) })
}

func TestSlackLinks(t *testing.T) {
	t.Parallel()
	storetest.RunSlackLinks(t, func(t *testing.T) storetest.SlackLinkStore { return newTestStore(t) })
}

func TestProviderJobs(t *testing.T) {
	t.Parallel()
	storetest.RunProviderJobs(t, func(t *testing.T) storetest.ProviderJobStore { return newTestStore(t) })
}

func TestWebhookSecrets(t *testing.T) {
	t.Parallel()
	storetest.RunWebhookSecrets(t, func(t *testing.T) storetest.WebhookSecretStore { return newTestStore(t) })
}

func TestEmbeddings(t *testing.T) {
	t.Parallel()
	storetest.RunEmbeddings(t, func(t *testing.T) storetest.EmbeddingStore { return newTestStore(t) })
}

func TestVendorCeilings(t *testing.T) {
	t.Parallel()
	storetest.RunVendorCeilings(t, func(t *testing.T) storetest.VendorCeilingStore { return newTestStore(t) })
}

func TestAuditChain(t *testing.T) {
	t.Parallel()
	storetest.RunAuditChain(t, storetest.AuditChain{
		Open: func(t *testing.T) storetest.AuditChainStore { return newTestStore(t) },
		Exec: func(t *testing.T, s storetest.AuditChainStore, statement string) error {
			// One connection: a script refused midway leaves its
			// transaction open there, rolled back before it is returned.
			conn, err := s.(*Store).db.Conn(t.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			if _, err = conn.ExecContext(t.Context(), statement); err != nil {
				conn.ExecContext(t.Context(), `ROLLBACK`)
			}
			return err
		},
		Unguard: []string{
			`DROP TRIGGER audit_events_no_update`,
			`DROP TRIGGER audit_events_no_delete`,
			`DROP TRIGGER audit_events_chained`,
			`DROP INDEX audit_events_chain`,
		},
		Bytes: func(b []byte) string { return fmt.Sprintf("X'%x'", b) },
	})
}

func TestOAuth(t *testing.T) {
	t.Parallel()
	storetest.RunOAuth(t, func(t *testing.T) storetest.OAuthStore { return newTestStore(t) })
}

// queryPlan answers SQLite's plan of query on s, its steps joined by
// "; " (EXPLAIN QUERY PLAN's detail column).
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
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
	return strings.Join(plan, "; ")
}

// readAtOnce holds n of db's connections at once, as n concurrent reads
// would, each running query unless it is empty, then hands them back to
// the pool.
func readAtOnce(t *testing.T, db *sql.DB, n int, query string) {
	t.Helper()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		if query == "" {
			continue
		}
		rows, err := c.QueryContext(t.Context(), query)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
