// Package postgres is the scaled-out toolplane.Store: PostgreSQL, written
// through a pgx connection pool, so any number of nodes share one journal,
// one set of approvals, one meter and one audit trail.
//
// The store takes the caller's pool (New) and owns no global state; Migrate
// brings its schema up to date. The tables live in the schema the pool's
// connections have first on their search_path ("public" unless the caller
// sets it, for example with the DSN parameter search_path or
// pgxpool.Config.ConnConfig.RuntimeParams). The store passes storetest, the
// conformance suite every backend runs, which is what makes it
// interchangeable with the embedded SQLite store.
//
// Every query filters by organization, every conditional write is one
// statement (so concurrent nodes need no locks and no read-then-write), and
// database errors are translated at this edge: a duplicate row is
// toolplane.ErrExists (or false, for InsertClaim), a missing one
// toolplane.ErrNotFound.
//
// Statements are prepared once per connection and reused: that is pgx's
// default query execution mode, and each pooled connection keeps its cache.
// A pool set to the simple protocol (as a transaction-pooling proxy such as
// PgBouncer needs) works too; the conformance suite runs in both modes.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// Store is a toolplane.Store on one PostgreSQL database. It is safe for
// concurrent use, by any number of goroutines and nodes; its concurrency on
// one node is the pool's.
type Store struct {
	pool *pgxpool.Pool
}

var _ toolplane.Store = (*Store)(nil)

// New answers a store on pool, which the caller owns and closes. The schema
// the pool's search_path selects must be migrated (Migrate) before use.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate primary key or
// unique index entry.
const uniqueViolation = "23505"

// isDuplicate reports whether err is a primary key or unique constraint
// violation, by its SQLSTATE.
func isDuplicate(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == uniqueViolation
}

// A scanner is a pgx.Row or pgx.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// checkLimit refuses a page size no list answers (see sqlstore.CheckLimit).
func checkLimit(limit int) error { return sqlstore.CheckLimit(limit) }

// The columns of the tables both stores read (see sqlstore).
const (
	approvalColumns    = sqlstore.ApprovalColumns
	auditColumns       = sqlstore.AuditColumns
	changeColumns      = sqlstore.ChangeColumns
	claimColumns       = sqlstore.ClaimColumns
	connectionColumns  = sqlstore.ConnectionColumns
	credentialColumns  = sqlstore.CredentialColumns
	toolVersionColumns = sqlstore.ToolVersionColumns
)

// dialect is how this store's statements are written (see sqlstore).
var dialect = sqlstore.Postgres

// page runs q, a list that asks for one row more than limit (see
// sqlstore.Query.Page), and answers the page of rows scan reads with the
// cursor next makes of its last row, "" when no row follows. q and err
// are what sqlstore answered for the list: err, or an error running q, is
// wrapped with op; an Empty q is a list no row can match, an empty page.
func page[T any](ctx context.Context, s *Store, op string, q *sqlstore.Query, err error, limit int, scan func(scanner) (T, error), next func(*T) string) ([]T, string, error) {
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	if q.Empty() {
		return nil, "", nil
	}
	rows, err := s.pool.Query(ctx, q.String(), q.Args()...)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	out, err := collect(rows, scan)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	out, after := sqlstore.Page(out, limit, next)
	return out, after, nil
}

// collect scans rows with scan and closes them.
func collect[T any](rows pgx.Rows, scan func(scanner) (T, error)) ([]T, error) {
	return collectSized(rows, 0, scan)
}

// collectSized is collect into room for size rows: a page read whole
// (an audit chain's) grows no slice.
func collectSized[T any](rows pgx.Rows, size int, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	if size > 0 {
		out = make([]T, 0, size)
	}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// zeroMicros is the zero time.Time in unix microseconds, as a NOT NULL time
// column holds it.
var zeroMicros = time.Time{}.UnixMicro()

// micros answers t as stored in a NOT NULL time column.
func micros(t time.Time) int64 { return t.UnixMicro() }

// optMicros answers t as stored in a nullable time column: NULL for the zero
// time, which means "none" (no lease, no resolution).
func optMicros(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMicro()
	return &v
}

func fromMicros(v int64) time.Time {
	if v == zeroMicros {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func fromOptMicros(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return fromMicros(*v)
}

// blob answers b as stored: NULL when empty, so nil and empty store alike.
func blob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// bytea answers s as a NOT NULL BYTEA column (a key, a hash) takes it. A Go
// string holds any bytes, so the conversion loses none; and the answer is
// never nil, which pgx would send as NULL, even for "".
func bytea(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// byteString scans a BYTEA column into a string, copying the bytes once.
type byteString struct{ dst *string }

func (b byteString) ScanBytes(v []byte) error {
	*b.dst = string(v)
	return nil
}
