// Package sqlite is the embedded toolplane.Store: one SQLite file, written
// through database/sql with the pure-Go modernc.org/sqlite driver, so the
// default install needs no database server and no cgo.
//
// The store takes the caller's pool (New) and keeps no state beside it; Open
// makes a pool configured for concurrent use (and remembers it, so that
// ReleaseMemory can close its idle connections when the node rests), and
// Migrate brings its schema up to date. The store passes storetest, the
// conformance suite every backend runs, which is what makes the backends
// interchangeable.
//
// Every query filters by organization, every conditional write is decided
// by one statement, and database errors are translated at this edge: a
// duplicate row is toolplane.ErrExists (or false, for InsertClaim), a
// missing one toolplane.ErrNotFound.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
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
	// connection closes. The map is never changed once published: a
	// statement prepared for the first time publishes a copy, under
	// stmtsMu, so a lookup takes no lock and boxes no key (a sync.Map's
	// does, an allocation each statement of every call).
	stmts   atomic.Pointer[map[string]*sql.Stmt]
	stmtsMu sync.Mutex
	// writer holds a token while one of the store's writes runs (see
	// lockWrite).
	writer chan struct{}
	// groups queues the writes that run as one transaction (see write).
	groups groups
	// chainHeads is where the store last chained each organization's
	// audit trail (see chainer.append).
	chainHeads lastHeads
	// auditArgs is the audit insert's arguments, kept from one event to
	// the next (see chainer.append).
	auditArgs auditArgs
	// auditShapes are the audit inserts made for events' shapes.
	auditShapes auditShapes
	// commits counts the store's commits since it last looked at the WAL;
	// checkpointing is set while a background checkpoint runs (see
	// committed).
	commits       atomic.Int64
	checkpointing atomic.Bool
	// watchers are told of every change of their topic the store writes
	// (WatchChanges).
	watchMu  sync.RWMutex
	watchers map[*watcher]struct{}
}

var _ toolplane.Store = (*Store)(nil)

// New answers a store on db, which the caller owns and closes. db should come
// from Open, or be opened with the same settings, and be migrated before use.
func New(db *sql.DB) *Store {
	return &Store{db: db, writer: make(chan struct{}, 1)}
}

// lockWrite waits for the store's other writes to end, or for ctx. SQLite
// takes one writer at a time; two connections of the pool that both want
// to write would otherwise meet at SQLite's lock, where the loser polls
// under busy_timeout, sleeping 1, 2, 5, 10 ms and more between tries, so a
// write call that met the background audit writer's commit lost a
// millisecond or more to a lock held for a few dozen microseconds. Queued
// here, the next writer starts the moment the last one ends. Readers never
// take it, and a writer on another pool (River's) still meets the store's
// at SQLite's lock, as before.
//
// The leader of a group of writes takes it for the group (see write), and
// the last pass of a checkpoint takes it too (see checkpoint). It is not
// reentrant.
func (s *Store) lockWrite(ctx context.Context) error {
	select {
	case s.writer <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) unlockWrite() { <-s.writer }

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
//   - wal_autocheckpoint=4000: a commit checkpoints in line only once the
//     WAL holds 4000 pages, not SQLite's 1000. A Store checkpoints before
//     that from a goroutine of its own (see checkpointPages); the in-line
//     one remains for a WAL the store could not start again, and for a
//     pool no Store writes through.
//
// The pool keeps up to maxIdleConns connections between uses: one closed
// and opened again costs its pragmas and every statement prepared anew, and
// the default of two is less than a write, the background audit writer and
// a checkpoint hold at once, or than the reads of the calls a node serves
// at once (the broker reads a connection on every call of an HTTP or SQL
// tool). A connection unused for connMaxIdle is closed, and with it the
// memory SQLite holds for it (see connMaxIdle).
//
// The caller closes the pool.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	return open(ctx, path, connMaxIdle)
}

// open is Open with the time an unused connection is kept.
func open(ctx context.Context, path string, maxIdle time.Duration) (*sql.DB, error) {
	if path == "" || path == ":memory:" {
		// An in-memory database is private to one connection: each pooled
		// connection would see a different, empty database.
		return nil, fmt.Errorf("open sqlite: %q is not a file path", path)
	}
	if err := private(path); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxIdleTime(maxIdle)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	pools.add(db)
	return db, nil
}

// pools are the pools Open made, held weakly (a pool nobody holds is not
// kept for this), whose idle connections ReleaseMemory closes.
var pools poolSet

type poolSet struct {
	mu  sync.Mutex
	dbs []weak.Pointer[sql.DB]
}

// add holds db, dropping the pools collected since.
func (p *poolSet) add(db *sql.DB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dbs = slices.DeleteFunc(p.dbs, func(w weak.Pointer[sql.DB]) bool { return w.Value() == nil })
	p.dbs = append(p.dbs, weak.Make(db))
}

// live answers the pools not yet collected.
func (p *poolSet) live() []*sql.DB {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*sql.DB, 0, len(p.dbs))
	for _, w := range p.dbs {
		if db := w.Value(); db != nil {
			out = append(out, db)
		}
	}
	return out
}

// releaseMu makes ReleaseMemory's callers take turns. database/sql's
// SetMaxIdleConns closes the connections it drops after letting go of the
// pool's lock, reading them from the pool's own array; while one caller
// closes them, another's restored limit would let returned connections be
// appended into that array, so a pooled connection would be closed and
// the one it overwrote never would. Nodes of one process call it at once:
// they rest on one grid.
var releaseMu sync.Mutex

// closeIdle closes the connections idle in p: each holds the schema
// parsed, its prepared statements and a page cache of up to 2 MB that a
// burst's reads filled (0.4 to 2 MB, in SQLite's allocator), which a
// connection a node at rest keeps using (the heartbeat's, the sweep's)
// would hold for good. The next statement opens a connection afresh, about
// 3 ms once; a connection in use is not touched.
func closeIdle(db *sql.DB) {
	db.SetMaxIdleConns(0)
	db.SetMaxIdleConns(maxIdleConns)
}

// private makes the database file, and the -wal and -shm files beside it,
// readable by this user only: they hold credential hashes, arguments and
// the audit trail. SQLite creates a new file with 0644 less the umask, and
// its -wal and -shm files with the database file's mode, so the file is
// created 0600 here before SQLite sees it; files an earlier version left
// readable to others are narrowed to 0600.
//
// A file that exists is never opened here, only looked at and narrowed by
// name. SQLite's locks are POSIX advisory locks, which belong to the
// process, and closing any descriptor of a file drops every lock the
// process holds on it. A node opens its file twice (the store's pool and
// River's), and a descriptor opened and closed here by the second Open
// dropped the lock the first pool's connections hold on the database file
// to say that the file is in use, while SQLite, which counts its locks per
// process, went on as if it held it. The next sqlite3 command an operator
// ran on the file then took it for unused: on closing it checkpointed the
// WAL and deleted the -wal and -shm files under the live node, whose
// connections went on committing into the deleted -wal, writes a restart
// never saw (TestLookingWithSQLite3KeepsCommittedWrites).
//
// A -wal or -shm another user owns, or this process cannot write, is
// refused before SQLite opens it (see checkSideFiles).
func private(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		// Only this call knows the file: no lock of SQLite's is on it yet.
		if err := f.Close(); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrExist):
	default:
		return err
	}
	if err := checkSideFiles(path); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("narrow %s to its owner: %w", p, err)
			}
		}
	}
	return nil
}

// ErrSideFile is the refusal of a database whose -wal or -shm file this
// process cannot share safely: one another user owns, or one it cannot
// write. The -wal holds commits not yet copied into the database file and
// the -shm indexes them; a node that cannot write both could serve stale
// data or lose the commits another process left there, so Open refuses
// and says which file to give back.
var ErrSideFile = errors.New("a file beside the database cannot be shared safely")

// maxIdleConns is how many connections Open's pool keeps between uses:
// enough for 16 calls' reads at once beside the writer, the audit writer
// and a checkpoint, with room to spare. An idle connection holds little
// until its page cache fills.
const maxIdleConns = 32

// connMaxIdle is how long Open's pool keeps a connection nobody uses. Each
// connection holds its own copy of the parsed schema, its prepared
// statements and a page cache of up to 2 MB, in SQLite's allocator (about
// 0.4 MB for a connection that ran one statement, 1–1.5 MB after a load of
// calls), and the pool kept every connection a burst of calls opened: a
// node at rest after serving 16 clients held the 5–7 it had opened. The
// pool reuses the connection returned last, so a node's background work
// (the heartbeat every 2 s, the sweep) keeps one or two in use and the
// others go. database/sql's cleaner looks every connMaxIdle, so a
// connection unused since a burst ended is closed within twice that, 8 s:
// before the node's idle check hands what they held back to the system
// (ReleaseMemory), which it does once per busy spell, at the earliest a
// whole window of 10 s after the burst (internal/cli, idleCheckEvery). A
// connection opened again costs about 3 ms (its pragmas, the schema read,
// its statements prepared anew): once per burst that needs more
// connections than the node's last few seconds did, and for River's pool
// each time its client wakes from a rest. Closing one loses nothing: database/sql closes only a connection
// outside any transaction, and a commit is in the WAL before its
// connection is back in the pool.
const connMaxIdle = 4 * time.Second

// dsn answers the file: URI for path with the pool's settings. The path is
// escaped so that '?', '#' and '%' in a file name stay in the file name.
func dsn(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "wal_autocheckpoint("+strconv.Itoa(autocheckpointPages)+")")
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
	if m := s.stmts.Load(); m != nil {
		if st, ok := (*m)[query]; ok {
			return st, nil
		}
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.stmtsMu.Lock()
	defer s.stmtsMu.Unlock()
	old := s.stmts.Load()
	if old != nil {
		if prev, ok := (*old)[query]; ok {
			st.Close()
			return prev, nil
		}
	}
	m := map[string]*sql.Stmt{}
	if old != nil {
		m = maps.Clone(*old)
	}
	m[query] = st
	s.stmts.Store(&m)
	return st, nil
}

// exec runs a write of one statement, committed on its own or with the
// group it joins (see write).
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := s.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.execOne(ctx, st, args)
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

// Checkpoints. Under WAL a commit appends pages to the -wal file, and a
// checkpoint copies them back into the database file, syncing both files
// (synchronous=NORMAL syncs there and nowhere else). SQLite's automatic
// checkpoint runs inside the commit that takes the WAL past 1000 pages, so
// every few dozen write calls one caller waited for the copy of hundreds of
// pages and two fsyncs, several milliseconds. The store checkpoints from a
// goroutine of its own instead. A checkpoint never changes what a commit
// made durable; it only moves where the pages live.
//
// The copy runs while the writers go on (a PASSIVE checkpoint takes no lock
// a writer or a reader waits for). But the WAL starts again from its
// beginning only once a checkpoint has copied all of it, and under a load
// that never pauses pages are appended while one syncs. So the last pages,
// the few appended during the copy, are copied with the store's writers held
// back at lockWrite; the next commit then starts the WAL afresh. A caller
// waits for that short last pass, not for the copy of the whole WAL.
//
// SQLite's automatic checkpoint stays on, at autocheckpointPages, well past
// where the store checkpoints: for a pool that is not a Store's, and for a
// WAL that could not start again (a reader still held an old snapshot).
const (
	// autocheckpointPages is the WAL size at which a commit checkpoints in
	// line (see Open): 16 MiB at the default page size.
	autocheckpointPages = 4000
	// checkpointPages is how many pages not yet copied start a checkpoint. A
	// checkpoint copies the last version of each page once and syncs each
	// file once, however many commits wrote the page, so a larger one costs
	// less per commit, while commits into a smaller WAL measured cheaper;
	// write calls were fastest at 2000 pages (8 MiB): 225–235 µs, against
	// 238–262 at 1000, 240–297 at 1500, 232–288 at 3000 and 277–325 at
	// 4000 (`go test -run XXX -bench 'WriteCall$' -benchtime 3000x -count 4
	// ./invoke/`, four runs each).
	checkpointPages = 2000
	// checkpointLastPages is how many pages may wait for the last pass, the
	// one the writers wait for; more than that get another pass first.
	checkpointLastPages = 256
	// checkpointPasses bounds the passes made while the writers go on.
	checkpointPasses = 3
	// checkpointLookEvery is how many of the store's commits pass between
	// looks at the WAL.
	checkpointLookEvery = 16
)

// committed counts a commit made on conn. Every checkpointLookEvery
// commits it looks at the WAL, and starts a checkpoint when checkpointPages
// wait and none runs. The look is one PRAGMA on the connection that just
// committed, whose page cache is warm; looking from another would load a
// stale cache anew. A pool of one or two connections gets no background
// checkpoint: it would hold a connection the callers queue for.
func (s *Store) committed(ctx context.Context, conn rowQuerier) {
	if s.commits.Add(1) < checkpointLookEvery {
		return
	}
	s.commits.Store(0)
	if s.checkpointing.Load() {
		return
	}
	if waiting, err := walWaiting(ctx, conn, "NOOP"); err != nil || waiting < checkpointPages {
		return
	}
	if n := s.db.Stats().MaxOpenConnections; n == 1 || n == 2 {
		return
	}
	if s.checkpointing.CompareAndSwap(false, true) {
		go s.checkpoint()
	}
}

// checkpoint copies the WAL into the database file: while the writers go
// on, until few enough pages are left, then those with the writers held
// back. Errors end it and are dropped on purpose: a checkpoint left undone
// is done by the next one or by SQLite's own, and a closed pool ends it.
func (s *Store) checkpoint() {
	defer s.checkpointing.Store(false)
	ctx := context.Background()
	for range checkpointPasses {
		if _, err := walWaiting(ctx, s.db, "PASSIVE"); err != nil {
			return
		}
		// PASSIVE answers what it left, not what was appended meanwhile.
		waiting, err := walWaiting(ctx, s.db, "NOOP")
		if err != nil {
			return
		}
		if waiting <= checkpointLastPages {
			break
		}
	}
	if err := s.lockWrite(ctx); err != nil {
		return
	}
	defer s.unlockWrite()
	_, _ = walWaiting(ctx, s.db, "PASSIVE")
}

// A rowQuerier is a *sql.DB or a *sql.Conn.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// walWaiting runs PRAGMA wal_checkpoint in mode (NOOP only looks) on q and
// answers how many pages of the WAL are not yet in the database file.
func walWaiting(ctx context.Context, q rowQuerier, mode string) (int, error) {
	var busy, wal, copied int
	if err := q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &wal, &copied); err != nil {
		return 0, err
	}
	return wal - copied, nil
}

// errScanner carries a preparation error to the caller's Scan, where a
// *sql.Row would carry a query error.
type errScanner struct{ err error }

func (e errScanner) Scan(...any) error { return e.err }

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
var dialect = sqlstore.SQLite

// auditSelect is auditColumns as a statement reads them: the hex columns
// stored as bytes read back as their text (see sqlstore.PackHex).
var auditSelect = dialect.AuditSelect("")

// claimSelect is claimColumns as a statement reads them: the key and the
// request hash stored as bytes read back as their text (see
// sqlstore.PackClaimKey).
var claimSelect = dialect.ClaimSelect()

// claimKeyText is the claims' key read back as its text, which orders
// ties as the text did.
var claimKeyText = sqlstore.ClaimKeyRead("key")

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
	rows, err := s.query(ctx, q.String(), q.Args()...)
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
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	return collectSized(rows, 0, scan)
}

// collectSized is collect into room for size rows: a page read whole
// (an audit chain's) grows no slice.
func collectSized[T any](rows *sql.Rows, size int, scan func(scanner) (T, error)) ([]T, error) {
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

// ReleaseMemory closes the idle connections of the pools Open made (see
// closeIdle), and hands back to the system the memory SQLite freed and its
// allocator keeps for reuse (see memory_libc.go): a node calls it when it
// goes to rest, once per busy spell, after the connections its burst
// opened closed for idleness (see connMaxIdle). The next allocations map
// pages afresh, a system call per 64 KB region or larger; a connection in
// use is not touched. A pool keeps as many idle connections as Open set
// after it.
func ReleaseMemory() error {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	// First the idle connections, so that what they held is freed before
	// the allocator's empty regions are handed back.
	for _, db := range pools.live() {
		closeIdle(db)
	}
	if err := releaseRetained(); err != nil {
		return fmt.Errorf("release sqlite's memory: %w", err)
	}
	return nil
}
