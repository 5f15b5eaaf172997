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

	"github.com/toolplane/toolplane"
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

// BenchmarkAuditChainOrganizations: 16 writers appending events one by
// one, all to one organization, or 8 to each of two. One organization's
// writers queue on its head row; two organizations' must not queue on
// each other's, so two take about the time of the same events split in
// half, run at once. ns/op is per event.
func BenchmarkAuditChainOrganizations(b *testing.B) {
	for _, c := range []struct {
		name string
		orgs int
	}{{"1org×16writers", 1}, {"2orgs×8writers", 2}} {
		b.Run(c.name, func(b *testing.B) {
			s := newTestStore(b)
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
