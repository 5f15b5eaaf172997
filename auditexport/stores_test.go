package auditexport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// store is what an exporter and its test need of a store.
type store interface {
	toolplane.AuditStore
	toolplane.AuditOutboxStore
}

// eachStore runs fn on a fresh SQLite store and, when the PostgreSQL DSN
// is set, on a fresh PostgreSQL schema.
func eachStore(t *testing.T, fn func(t *testing.T, s store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, sqlitetest.New(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newPostgres(t))
	})
}

// newPostgres answers a migrated store in a schema of its own.
func newPostgres(t testing.TB) *postgres.Store {
	dsn := pgtest.SchemaDSN(t, pgtest.DSN(t))
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.New(pool)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// appendEvents stores n events of org, ids <prefix>-00000…, through the
// store's batch insert when it has one (as the audit writer does).
func appendEvents(t testing.TB, s store, org, prefix string, n int) []*toolplane.AuditEvent {
	t.Helper()
	evs := make([]*toolplane.AuditEvent, n)
	base := time.Now().Add(-time.Minute)
	for i := range evs {
		evs[i] = &toolplane.AuditEvent{ID: fmt.Sprintf("%s-%05d", prefix, i), OrganizationID: org, RunID: "run-1",
			Tool: "payments.refund", Outcome: "ok", Source: toolplane.SourceREST, UserID: "user-ada",
			Arguments: []byte(`{"amount_cents":100,"card":"[sensitive]"}`), CreatedAt: base.Add(time.Duration(i) * time.Microsecond)}
	}
	type batcher interface {
		AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error
	}
	for from := 0; from < n; from += 256 {
		to := min(from+256, n)
		if b, ok := s.(batcher); ok {
			if err := b.AppendAuditBatch(context.Background(), evs[from:to]); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, e := range evs[from:to] {
			if err := s.AppendAudit(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
	}
	return evs
}
