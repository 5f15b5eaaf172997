// Package sqlite is the embedded toolplane.Store: one SQLite file, written
// through database/sql with the pure-Go modernc.org/sqlite driver, so the
// default install needs no database server and no cgo.
//
// The store takes the caller's pool (New) and owns no global state; Open
// makes a pool configured for concurrent use, and Migrate brings its schema
// up to date. The store passes storetest, the conformance suite every
// backend runs, which is what makes the backends interchangeable.
//
// Every query filters by organization, every conditional write is one
// statement, and database errors are translated at this edge: a duplicate
// row is toolplane.ErrExists (or false, for InsertClaim), a missing one
// toolplane.ErrNotFound.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// busyTimeout is how long a connection waits for another connection's write
// lock before giving up with SQLITE_BUSY (see Open).
const busyTimeout = 10 * time.Second

// Store is a toolplane.Store on one SQLite database. It is safe for
// concurrent use; its concurrency is the pool's.
type Store struct {
	db *sql.DB
	// stmts caches prepared statements by query text: preparing costs
	// more than running most of these queries. database/sql prepares each
	// one lazily on every pooled connection and finalizes it when the
	// connection closes.
	stmts sync.Map // string → *sql.Stmt
}

var _ toolplane.Store = (*Store)(nil)

// New answers a store on db, which the caller owns and closes. db should come
// from Open, or be opened with the same settings, and be migrated before use.
func New(db *sql.DB) *Store {
	return &Store{db: db}
}

// Open opens (creating if need be) the database file at path, configured for
// a concurrent embedded store, and checks that it can be used. The settings
// travel in the DSN, so every connection the pool opens, now or later, gets
// them:
//
//   - journal_mode=WAL: readers never block the writer or each other.
//   - busy_timeout=10000: a writer waits up to ten seconds for the write
//     lock; writers queue for milliseconds under load, so a busy database
//     slows them down instead of failing them.
//   - foreign_keys=1: SQLite leaves them off on every new connection
//     otherwise, and a reference a migration declares would go unenforced.
//   - synchronous=NORMAL: no fsync per commit. Under WAL a commit survives
//     a process crash and the file never corrupts, but an OS crash or power
//     loss can drop the last commits before a checkpoint.
//   - _txlock=immediate: a transaction takes the write lock at BEGIN, so it
//     waits under busy_timeout instead of failing with SQLITE_BUSY when it
//     first writes after reading.
//
// The caller closes the pool.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	if path == "" || path == ":memory:" {
		// An in-memory database is private to one connection: each pooled
		// connection would see a different, empty database.
		return nil, fmt.Errorf("open sqlite: %q is not a file path", path)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// dsn answers the file: URI for path with the pool's settings. The path is
// escaped so that '?', '#' and '%' in a file name stay in the file name.
func dsn(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if strings.HasPrefix(escaped, "/") {
		// An empty authority, so a path starting "//" is not read as a host.
		return "file://" + escaped + "?" + q.Encode()
	}
	return "file:" + escaped + "?" + q.Encode()
}

// prepared answers the cached statement for query, preparing it on first
// use. A statement that fails to prepare (say, before Migrate) is not cached.
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) queryRow(ctx context.Context, query string, args ...any) scanner {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return errScanner{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errScanner carries a preparation error to the caller's Scan, where a
// *sql.Row would carry a query error.
type errScanner struct{ err error }

func (e errScanner) Scan(...any) error { return e.err }

// maxLimit is the largest page a list answers.
const maxLimit = 1000

// errLimit and errCursor describe bad arguments; they are wrapped with the
// call they came from.
var (
	errLimit  = errors.New("limit must be between 1 and 1000")
	errCursor = cursor.ErrMalformed
)

func checkLimit(limit int) error {
	if limit < 1 || limit > maxLimit {
		return fmt.Errorf("%w, not %d", errLimit, limit)
	}
	return nil
}

// isDuplicate reports whether err is a primary key or unique constraint
// violation, by SQLite's extended result code.
func isDuplicate(err error) bool {
	var e *modernc.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return true
	}
	return false
}

// A scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// zeroMicros is the zero time.Time in unix microseconds, as a NOT NULL time
// column holds it.
var zeroMicros = time.Time{}.UnixMicro()

// micros answers t as stored in a NOT NULL time column.
func micros(t time.Time) int64 { return t.UnixMicro() }

// optMicros answers t as stored in a nullable time column: NULL for the zero
// time, which means "none" (no lease, no resolution).
func optMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == zeroMicros {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func fromOptMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// blob answers b as stored: NULL when empty, so nil and empty store alike.
func blob(b []byte) driver.Value {
	if len(b) == 0 {
		return nil
	}
	return b
}
