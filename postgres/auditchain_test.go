package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// TestAuditRoleWithoutRights: a role granted what the node needs of the
// trail (SELECT and INSERT) cannot UPDATE or DELETE it even with the
// append-only trigger disabled: the privilege alone refuses (42501), as a
// deployment that runs toolplane as such a role relies on.
func TestAuditRoleWithoutRights(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	org := "org-role"
	for i := range 2 {
		e := &toolplane.AuditEvent{ID: fmt.Sprintf("ev-%d", i), OrganizationID: org, Tool: "demo.noop", Outcome: "ok", CreatedAt: time.Now()}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	role := "toolplane_app_" + strings.ToLower(rand.Text()[:10])
	for _, st := range []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT USAGE ON SCHEMA ` + schemaOf(s) + ` TO ` + role,
		`GRANT SELECT, INSERT ON audit_events, audit_checkpoints TO ` + role,
		`GRANT SELECT, INSERT, UPDATE ON audit_heads TO ` + role,
		`ALTER TABLE audit_events DISABLE TRIGGER USER`,
	} {
		if _, err := s.pool.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), `DROP OWNED BY `+role)
		s.pool.Exec(context.Background(), `DROP ROLE `+role)
	})
	for _, st := range []string{
		`UPDATE audit_events SET outcome = 'denied' WHERE organization_id = 'org-role'`,
		`DELETE FROM audit_events WHERE organization_id = 'org-role'`,
		`DELETE FROM audit_checkpoints`,
	} {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, st)
			return err
		})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as %s: %v; want 42501 (insufficient_privilege)", st, role, err)
		}
	}
	// The role can still append, and the chain goes on.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
			return err
		}
		e := &toolplane.AuditEvent{ID: "ev-as-role", OrganizationID: org, Tool: "demo.noop", Outcome: "ok", CreatedAt: time.Now()}
		_, err := tx.Exec(ctx, insertAudit, auditArgs(e)...)
		return err
	})
	if err != nil {
		t.Fatalf("append as %s: %v", role, err)
	}
	if h, _, err := s.AuditHead(ctx, org); err != nil || h.Seq != 3 {
		t.Fatalf("head = %+v, %v; want 3", h, err)
	}
}

// schemaOf answers the schema s's pool works in.
func schemaOf(s *Store) string {
	return s.pool.Config().ConnConfig.RuntimeParams["search_path"]
}

// BenchmarkAuditChainOrganizations: 16 writers on 16 connections
// appending events one by one (each its own transaction), all to one
// organization, 8 to each of two, or one to each of 16. An organization's
// writers queue on its head row, which its holder keeps until its commit
// is flushed: one organization's appends go at most one commit at a time.
// Other organizations' appends do not queue behind it, so the throughput
// grows with the organizations writing (with 16, it is the table's
// without a chain). ns/op is per event; AppendAuditBatch (the audit
// writer's path) puts many events in one commit.
func BenchmarkAuditChainOrganizations(b *testing.B) {
	for _, c := range []struct {
		name string
		orgs int
	}{{"1org×16writers", 1}, {"2orgs×8writers", 2}, {"16orgs×1writer", 16}} {
		b.Run(c.name, func(b *testing.B) {
			cfg, err := pgxpool.ParseConfig(pgtest.DSN(b))
			if err != nil {
				b.Fatal(err)
			}
			cfg.ConnConfig.RuntimeParams["search_path"] = newSchema(b)
			cfg.MaxConns = 16
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			s := New(pool)
			if err := s.Migrate(context.Background()); err != nil {
				b.Fatal(err)
			}
			const writers = 16
			var n atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				org := fmt.Sprintf("org-%d", w%c.orgs)
				wg.Go(func() {
					for {
						i := n.Add(1)
						if i > int64(b.N) {
							return
						}
						e := &toolplane.AuditEvent{ID: fmt.Sprintf("ev-%d", i), OrganizationID: org, RunID: "run-1", Tool: "demo.search_tickets",
							Source: toolplane.SourceMCP, Outcome: "ok", ArgumentsHash: "sha256:4f2a9c0e", LatencyMicros: 234, CreatedAt: time.Now()}
						if err := s.AppendAudit(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}

// TestAuditRetentionAsAppRole: the role a deployment runs toolplane as
// (SELECT and INSERT on the trail, EXECUTE on audit_drop) cannot DELETE a
// row of the trail, with the door's settings or without, but drops an
// expired range through audit_drop, and what remains verifies.
func TestAuditRetentionAsAppRole(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	org := "org-retain"
	now := time.Now()
	for i := range 4 {
		e := &toolplane.AuditEvent{ID: fmt.Sprintf("ev-%d", i), OrganizationID: org, Tool: "demo.noop", Outcome: "ok",
			CreatedAt: now.Add(time.Duration(i-10) * time.Hour)}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	role := "toolplane_app_" + strings.ToLower(rand.Text()[:10])
	for _, st := range []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT USAGE ON SCHEMA ` + schemaOf(s) + ` TO ` + role,
		`GRANT SELECT, INSERT ON audit_events, audit_checkpoints TO ` + role,
		`GRANT SELECT, INSERT, UPDATE ON audit_heads TO ` + role,
		`GRANT EXECUTE ON FUNCTION audit_drop(TEXT, BIGINT, BYTEA, BIGINT, TEXT, BYTEA) TO ` + role,
	} {
		if _, err := s.pool.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), `DROP OWNED BY `+role)
		s.pool.Exec(context.Background(), `DROP ROLE `+role)
	})
	asRole := func(f func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
				return err
			}
			return f(tx)
		})
	}
	keys := &auditchain.KeySet{}
	if _, err := keys.Generate(now); err != nil {
		t.Fatal(err)
	}
	evs, err := s.AuditChain(ctx, org, 1, 0, 10)
	if err != nil || len(evs) != 4 {
		t.Fatalf("chain = %d events, %v", len(evs), err)
	}
	cp := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: 2, Hash: evs[1].Hash, CreatedAt: now}
	if err := keys.Sign(cp); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAuditCheckpoint(ctx, cp); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{
		`DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq <= 2`,
		`SELECT set_config('toolplane.audit_retention', '` + org + `', true), set_config('toolplane.audit_retention_through', '2', true)`,
	} {
		err := asRole(func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM audit_events WHERE organization_id = '`+org+`' AND seq <= 2`)
			return err
		})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("a DELETE as %s after %s: %v; want 42501", role, st, err)
		}
	}
	// Events younger than the floor (a day by default) are not dropped,
	// whatever checkpoint the role brings, and the role cannot lower it.
	var pe *pgconn.PgError
	err = asRole(func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT audit_drop($1, $2, $3, $4, $5, $6)`, checkpointArgs(cp)...)
		return err
	})
	if !errors.As(err, &pe) || pe.Code != "TP403" {
		t.Fatalf("audit_drop of 10-hour-old events under a day's floor = %v; want TP403", err)
	}
	err = asRole(func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE audit_retention_floor SET min_age_seconds = 0`)
		return err
	})
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("the role lowering the floor = %v; want 42501", err)
	}
	// The database's owner sets it to an hour.
	if _, err := s.pool.Exec(ctx, `UPDATE audit_retention_floor SET min_age_seconds = 3600`); err != nil {
		t.Fatal(err)
	}
	// The retention path, as the role: audit_drop drops the prefix.
	var n int64
	var door string
	err = asRole(func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT audit_drop($1, $2, $3, $4, $5, $6)`, checkpointArgs(cp)...).Scan(&n); err != nil {
			return err
		}
		// The door is closed again once audit_drop returns.
		return tx.QueryRow(ctx, `SELECT current_setting('toolplane.audit_retention', true)`).Scan(&door)
	})
	if err != nil || n != 2 || door != "" {
		t.Fatalf("audit_drop as %s = %d, %v (door %q after); want 2 rows, the door closed", role, n, err, door)
	}
	// Nothing is left at 2: the drop was whole.
	if _, err := s.pool.Exec(ctx, `SELECT audit_drop($1, $2, $3, $4, $5, $6)`, checkpointArgs(cp)...); !errors.As(err, &pe) || pe.Code != "TP404" {
		t.Fatalf("audit_drop at a dropped position = %v; want TP404", err)
	}
	r, err := auditchain.VerifyStore(ctx, s, keys, org, 0, 0)
	if err != nil || !r.OK || r.Anchor != 2 || r.Events != 2 {
		t.Fatalf("verify after the drop = %+v, %v", r, err)
	}
	// And the Go path, the retention job's.
	drops, err := auditchain.Retain(ctx, s, keys, org, now.Add(-6*time.Hour-30*time.Minute), now, nil)
	if err != nil || len(drops) != 1 || drops[0].Through != 4 {
		t.Fatalf("Retain = %+v, %v; want 3..4", drops, err)
	}
	if r, err := auditchain.VerifyStore(ctx, s, keys, org, 0, 0); err != nil || !r.OK {
		t.Fatalf("verify after Retain = %+v, %v", r, err)
	}
}
