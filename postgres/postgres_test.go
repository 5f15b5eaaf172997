package postgres

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/internal/sqlstore"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/storetest"
)

// testConns is each test pool's size: fewer connections than the suite's
// concurrent writers, so they contend for them as on a busy node.
const testConns = 4

// schemaSlots bounds the test schemas alive at once. Parallel tests run
// GOMAXPROCS at a time, and on a many-core machine that many pools would
// exceed PostgreSQL's default max_connections (100). A test uses at most
// one schema, so waiting for a slot never deadlocks.
var schemaSlots = make(chan struct{}, 8)

// newSchema creates an empty schema (pgtest.Schema) and answers its name,
// taking a slot until t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	schemaSlots <- struct{}{}
	t.Cleanup(func() { <-schemaSlots })
	return pgtest.Schema(t, dsn)
}

// openPool answers a pool whose connections have searchPath (schema
// names) as their search_path, closed by t.Cleanup.
func openPool(t testing.TB, searchPath ...string) *pgxpool.Pool {
	t.Helper()
	return openPoolMode(t, pgx.QueryExecModeCacheStatement, searchPath...)
}

// openPoolMode is openPool with the pool's query execution mode set.
func openPoolMode(t testing.TB, mode pgx.QueryExecMode, searchPath ...string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatalf("parse %s: %v", pgtest.DSNVariable, err)
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
	pgtest.DSN(t)
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
	pgtest.DSN(t)
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

func TestMaintenance(t *testing.T) {
	t.Parallel()
	storetest.RunMaintenance(t, func(t *testing.T) storetest.MaintenanceStore { return newTestStore(t) }, sqlstore.ErrLimit)
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t)
	embedded, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	pool := func(s storetest.MigratingStore) *pgxpool.Pool { return s.(*Store).pool }
	storetest.RunMigrations(t, storetest.Migrations{
		Embedded: embedded,
		Open:     func(t *testing.T) storetest.MigratingStore { return New(openPool(t, newSchema(t))) },
		// Another node has a pool of its own on the same schema.
		Reopen: func(t *testing.T, s storetest.MigratingStore) storetest.MigratingStore {
			return New(openPool(t, pool(s).Config().ConnConfig.RuntimeParams["search_path"]))
		},
		Exec: func(t *testing.T, s storetest.MigratingStore, statement string) {
			t.Helper()
			if _, err := pool(s).Exec(t.Context(), statement); err != nil {
				t.Fatalf("%s: %v", statement, err)
			}
		},
		Count: func(t *testing.T, s storetest.MigratingStore, query string) int {
			t.Helper()
			var n int
			if err := pool(s).QueryRow(t.Context(), query).Scan(&n); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			return n
		},
		Before: func(t *testing.T, version int) storetest.MigratingStore {
			t.Helper()
			s := New(openPool(t, newSchema(t)))
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
			s := New(openPool(t, newSchema(t)))
			for _, m := range embedded {
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
			return s
		},
		// Every insert names its organization: the column keeps no default.
		AfterCatalogOrganizations: func(t *testing.T, s storetest.MigratingStore) {
			t.Helper()
			if _, err := pool(s).Exec(t.Context(), `INSERT INTO tool_versions (name, version, state, schema_hash, owner, review_reasons,
				published_by, published_at, reviewed_by, review_note, replacement, retire_blocked, revision, updated_at)
				VALUES ('x', '1.0.0', 'active', '', '', '{}', '', 0, '', '', '', '', 0, 0)`); err == nil {
				t.Error("an insert without an organization was stored")
			}
		},
	})
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
	fresh := pgtest.Schema(t, pgtest.DSN(t))
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
		events, _, err := s.ListAudit(ctx, org, toolplane.AuditFilter{}, "", sqlstore.MaxLimit)
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

// TestCursorPartsTextColumnsCannotHold refuses, as malformed, cursors whose
// tool or ID part no PostgreSQL text value holds, before any query (that a
// key part holds any byte, storetest checks).
func TestCursorPartsTextColumnsCannotHold(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	for _, bad := range []string{"a\x00b", "\xff"} {
		if _, _, err := s.ListClaims(ctx, "org", toolplane.ClaimProcessing, cursor.Encode(cursor.Claims, 0, bad, "k"), 10); !errors.Is(err, cursor.ErrMalformed) {
			t.Errorf("ListClaims(tool %q) err = %v, want cursor.ErrMalformed", bad, err)
		}
		if _, _, err := s.ListApprovals(ctx, "org", toolplane.ApprovalPending, cursor.Encode(cursor.Approvals, 0, bad), 10); !errors.Is(err, cursor.ErrMalformed) {
			t.Errorf("ListApprovals(id %q) err = %v, want cursor.ErrMalformed", bad, err)
		}
		if _, _, err := s.ListAudit(ctx, "org", toolplane.AuditFilter{}, cursor.Encode(cursor.Audit, 0, bad), 10); !errors.Is(err, cursor.ErrMalformed) {
			t.Errorf("ListAudit(id %q) err = %v, want cursor.ErrMalformed", bad, err)
		}
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
		{"FindApprovals", `SELECT * FROM approvals WHERE organization_id = $1 AND tool = $2 AND key = $3 ORDER BY created_at DESC, id DESC`, []any{"o", "t", k}},
		{"FileApproval pending", `SELECT * FROM approvals WHERE organization_id = $1 AND tool = $2 AND key = $3 AND status = 'pending'`, []any{"o", "t", k}},
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
	pgtest.DSN(t)
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
	pgtest.DSN(t)
	storetest.RunAuditChain(t, storetest.AuditChain{
		Open: func(t *testing.T) storetest.AuditChainStore { return newTestStore(t) },
		Exec: func(t *testing.T, s storetest.AuditChainStore, statement string) error {
			_, err := s.(*Store).pool.Exec(t.Context(), statement)
			return err
		},
		Unguard: []string{
			`ALTER TABLE audit_events DISABLE TRIGGER USER`,
			`ALTER TABLE audit_checkpoints DISABLE TRIGGER USER`,
			`ALTER TABLE audit_heads DISABLE TRIGGER USER`,
			`ALTER TABLE audit_events DROP CONSTRAINT audit_events_chained`,
			`DROP INDEX audit_events_chain`,
		},
		Bytes:     func(b []byte) string { return fmt.Sprintf(`'\x%x'::bytea`, b) },
		HeadTable: true,
		Writers:   16,
	})
}

func TestOAuth(t *testing.T) {
	t.Parallel()
	storetest.RunOAuth(t, func(t *testing.T) storetest.OAuthStore { return newTestStore(t) })
}
