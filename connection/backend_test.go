package connection_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// backend is a store the broker's tests run on: nodes answers, for one
// test, a function giving the store of each node it starts.
type backend struct {
	name  string
	nodes func(t *testing.T, e *env) func() connection.Store
}

// backends answers the embedded SQLite, one node (every node is e's
// store), and PostgreSQL when TOOLPLANE_TEST_POSTGRES is set, where each
// node has a pool of its own on one schema of the test's.
func backends(t *testing.T) []backend {
	t.Helper()
	all := []backend{{name: "sqlite", nodes: func(t *testing.T, e *env) func() connection.Store {
		return func() connection.Store { return e.store }
	}}}
	dsn, ok := pgtest.LookupDSN()
	if !ok {
		return all
	}
	return append(all, backend{name: "postgres", nodes: func(t *testing.T, e *env) func() connection.Store {
		scoped := pgtest.SchemaDSN(t, dsn)
		migrated := false
		return func() connection.Store {
			t.Helper()
			pool, err := pgxpool.New(context.Background(), scoped)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := postgres.New(pool)
			if !migrated {
				if err := s.Migrate(context.Background()); err != nil {
					t.Fatal(err)
				}
				migrated = true
			}
			return s
		}
	}})
}
