package sqlruntime

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/toolplane/toolplane"
)

// poolKey names a pool: one per version of a connection, so a rotated
// connection string is never served by a pool opened with the old one.
type poolKey struct {
	id      string
	version int64
}

// pool is the database of one connection version.
type pool struct {
	dialect dialect
	db      *sql.DB
	// ro, for SQLite, is a pool whose connections refuse writes (PRAGMA
	// query_only), which is what a read runs on: SQLite has no read-only
	// transaction to ask for.
	ro *sql.DB
	// ctl, for MySQL, is a pool of its own for KILL QUERY: a statement
	// whose call ran out of time is stopped from another session, and
	// must not wait for one behind the very calls it stops.
	ctl *sql.DB

	// vetMu serialises the inspection of the role before the pool's first
	// call (see role.go); vetted, set once the role was found acceptable
	// and after mariadb, lets every later call pass without the lock.
	vetMu   sync.Mutex
	vetted  atomic.Bool
	mariadb bool
}

// reader answers the pool a read runs on.
func (p *pool) reader() *sql.DB {
	if p.ro != nil {
		return p.ro
	}
	return p.db
}

// sessionResets are what ends, on a pooled session, whatever a call's
// statement left on it beyond its transaction: locks a session holds
// until it releases them (PostgreSQL's advisory locks, MySQL's named
// locks), settings, a role, temporary tables, listeners. A read's
// read-only transaction does not stop a statement from taking them, and
// left in place they would block other clients of the database and
// change how the next call through the pool runs. Each is fixed text,
// run without arguments. SQLite keeps nothing of the kind: its
// authorizer refuses PRAGMA and temporary objects.
var sessionResets = map[dialect]string{
	// DISCARD ALL without DEALLOCATE ALL and DISCARD PLANS, which would
	// drop the statements the driver keeps prepared on the session.
	dialectPostgres: `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; ` +
		`SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES`,
	// Named locks are released before the session closes (see
	// discardSession), so another client may take them as soon as the
	// call has ended rather than whenever the server notices the close.
	dialectMySQL: `SELECT RELEASE_ALL_LOCKS()`,
}

// discardSession names the dialects whose sessions are closed after
// every call rather than pooled. MySQL keeps user variables, session
// variables a stored routine set, and temporary tables on a session, and
// has no statement that clears them all; only the protocol's
// COM_RESET_CONNECTION does, which the driver does not send. A new
// session per call costs about 0.7 ms on loopback (BenchmarkReadMySQL:
// 0.62 ms a read on a pooled session, 1.35 ms on a new one), the price of
// every call starting as the first one did.
var discardSession = map[dialect]bool{dialectMySQL: true}

// resetTimeout bounds a session's reset; a session that does not answer
// in it is closed instead.
const resetTimeout = 5 * time.Second

// reset ends what a call left on conn's session, once its transaction
// has ended, before conn goes back to the pool. A session whose reset
// fails, or whose dialect cannot be reset, is closed rather than pooled:
// database/sql discards a connection whose Raw answers driver.ErrBadConn.
func (p *pool) reset(ctx context.Context, conn *sql.Conn) {
	stmt, ok := sessionResets[p.dialect]
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resetTimeout)
	defer cancel()
	if _, err := conn.ExecContext(rctx, stmt); err != nil || discardSession[p.dialect] {
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

func (p *pool) close() error {
	err := p.db.Close()
	for _, db := range []*sql.DB{p.ro, p.ctl} {
		if db != nil {
			err = errors.Join(err, db.Close())
		}
	}
	return err
}

// refusal is a connection the runtime will not open: what is wrong with
// it, in the runtime's words, naming the connection by ID only. Nothing
// was sent anywhere.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

// errClosed: the runtime was closed.
var errClosed = errors.New("the SQL runtime is closed")

// acquire answers the pool of rel's connection version, opening it on
// first use. A newer version retires the pools of older ones: they close
// once their calls end. A call still carrying an older version than the
// newest seen gets a pool of its own, closed by done.
func (r *Runtime) acquire(rel *toolplane.Released, d dialect) (p *pool, done func(), err error) {
	c := rel.Connection
	key := poolKey{c.ID, c.Version}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, errClosed
	}
	if p := r.pools[key]; p != nil && p.dialect == d {
		return p, func() {}, nil
	}
	p, err = r.open(c, d, rel.Secrets.DSN)
	if err != nil {
		return nil, nil, err
	}
	latest, seen := r.latest[c.ID]
	if seen && c.Version < latest {
		return p, func() { p.close() }, nil
	}
	r.latest[c.ID] = c.Version
	for k, old := range r.pools {
		if k.id == c.ID {
			delete(r.pools, k)
			r.retire(old)
		}
	}
	r.pools[key] = p
	return p, func() {}, nil
}

// retire closes a pool no new call will use. sql.DB.Close closes idle
// connections at once and each busy one when its call gives it back, so a
// call under way on the old version ends as it began.
func (r *Runtime) retire(p *pool) {
	r.closing.Add(1)
	go func() {
		defer r.closing.Done()
		p.close()
	}()
}

// open builds the pool for a connection. Opening connects to nothing:
// database/sql dials on first use, under the call's context.
func (r *Runtime) open(c *toolplane.Connection, d dialect, dsn toolplane.SecretString) (*pool, error) {
	id := c.ID
	var p *pool
	switch d {
	case dialectPostgres:
		db, err := r.openPostgres(c, dsn.Reveal())
		if err != nil {
			return nil, err
		}
		p = &pool{dialect: d, db: db}
	case dialectMySQL:
		db, ctl, err := r.openMySQL(c, dsn.Reveal())
		if err != nil {
			return nil, err
		}
		ctl.SetMaxOpenConns(2)
		ctl.SetMaxIdleConns(1)
		ctl.SetConnMaxIdleTime(time.Minute)
		p = &pool{dialect: d, db: db, ctl: ctl}
	case dialectSQLite:
		path, err := sqlitePath(organizationDir(r.cfg.SQLiteDir, c.OrganizationID), dsn.Reveal())
		if err != nil {
			return nil, &refusal{msg: "connection " + id + ": " + err.Error()}
		}
		registerSQLite()
		rw, err := sql.Open(sqliteDriverName, sqliteDSN(path, false))
		if err != nil {
			return nil, &refusal{msg: "connection " + id + ": the SQLite database cannot be opened"}
		}
		ro, err := sql.Open(sqliteDriverName, sqliteDSN(path, true))
		if err != nil {
			rw.Close()
			return nil, &refusal{msg: "connection " + id + ": the SQLite database cannot be opened"}
		}
		p = &pool{dialect: d, db: rw, ro: ro}
	}
	for _, db := range []*sql.DB{p.db, p.ro} {
		if db == nil {
			continue
		}
		db.SetMaxOpenConns(r.cfg.MaxOpenConns)
		db.SetMaxIdleConns(r.cfg.MaxOpenConns)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	return p, nil
}

// postgresKeys are the connection string keys a PostgreSQL connection may
// state. The rest either read files on the platform's machine (passfile,
// servicefile, sslkey, sslcert, sslrootcert) or are not needed to reach a
// database; pgx refuses them before touching the filesystem.
var postgresKeys = []string{
	"host", "port", "user", "password", "dbname", "sslmode", "ssl", "sslsni", "sslnegotiation",
	"connect_timeout", "application_name", "search_path", "target_session_attrs", "channel_binding",
}

// openPostgres opens a pool on a postgres:// URL. Only the URL form is
// taken, so the password it states is known exactly: pgx fills a missing
// password from the platform's environment (PGPASSWORD) and password
// file, which must never be presented to an organization's server.
func (r *Runtime) openPostgres(c *toolplane.Connection, dsn string) (*sql.DB, error) {
	id := c.ID
	bad := &refusal{msg: "connection " + id + ": the PostgreSQL connection string is not a postgres:// URL the runtime accepts (host, port, user, password, dbname, sslmode and the like)"}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, bad
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, bad
	}
	password, _ := u.User.Password()
	opts := pgx.ParseConfigOptions{ParseConfigOptions: pgconn.ParseConfigOptions{ConnStringAllowedKeys: postgresKeys}}
	cfg, err := pgx.ParseConfigWithOptions(dsn, opts)
	if err != nil {
		return nil, bad
	}
	cfg.Password = password
	if r.cfg.Dial != nil {
		if strings.HasPrefix(cfg.Host, "/") {
			return nil, &refusal{msg: "connection " + id + ": a PostgreSQL Unix socket is outside what the connection's egress rules can allow"}
		}
		dial, err := r.cfg.Dial(c)
		if err != nil {
			return nil, &refusal{msg: "connection " + id + ": its egress rules cannot be used: " + err.Error()}
		}
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) { return dial(ctx, network, addr) }
		// The egress check resolves the name itself, so it sees the host
		// the connection names rather than an address pgx chose.
		cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	}
	return stdlib.OpenDB(*cfg), nil
}

// openMySQL opens a pool on a go-sql-driver DSN. Whatever the DSN says,
// arguments are sent as bound values (never interpolated into the text),
// one statement runs per call, and LOAD DATA LOCAL cannot read the
// platform's files. It answers the calls' pool and a second one on the
// same connector, for stopping their statements.
func (r *Runtime) openMySQL(c *toolplane.Connection, dsn string) (*sql.DB, *sql.DB, error) {
	id := c.ID
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, &refusal{msg: "connection " + id + ": the MySQL connection string cannot be read"}
	}
	cfg.InterpolateParams = false
	cfg.MultiStatements = false
	cfg.AllowAllFiles = false
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if r.cfg.Dial != nil {
		if cfg.Net != "tcp" && cfg.Net != "tcp4" && cfg.Net != "tcp6" {
			return nil, nil, &refusal{msg: "connection " + id + ": a MySQL connection over " + cfg.Net + " is outside what the connection's egress rules can allow"}
		}
		dial, err := r.cfg.Dial(c)
		if err != nil {
			return nil, nil, &refusal{msg: "connection " + id + ": its egress rules cannot be used: " + err.Error()}
		}
		cfg.DialFunc = dial
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, &refusal{msg: "connection " + id + ": the MySQL connection string cannot be used"}
	}
	return sql.OpenDB(conn), sql.OpenDB(conn), nil
}

// sqliteDriverName is the name the runtime's own SQLite driver is
// registered under: its connections carry the authorizer, and the
// platform's store, on the default driver, does not.
const sqliteDriverName = "toolplane-sqlruntime-sqlite"

var registerOnce sync.Once

func registerSQLite() {
	registerOnce.Do(func() {
		d := &sqlite.Driver{}
		d.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, _ string) error {
			a, ok := c.(sqlite.AuthorizerRegisterer)
			if !ok {
				return errors.New("the SQLite driver offers no authorizer")
			}
			return a.RegisterAuthorizer(authorize)
		})
		sql.Register(sqliteDriverName, d)
	})
}

// authorize is the SQLite authorizer of every connection the runtime
// opens. A statement may not reach another file (ATTACH; VACUUM INTO
// attaches too), change the connection's settings (PRAGMA: query_only
// among them, which is what keeps a read from writing), leave objects on
// a pooled connection for the next call (TEMP tables, views, triggers),
// or load code.
func authorize(action sqlite.AuthorizerActionCode, _, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthAttach, sqlite.AuthDetach, sqlite.AuthPragma,
		sqlite.AuthCreateTempTable, sqlite.AuthCreateTempIndex, sqlite.AuthCreateTempTrigger, sqlite.AuthCreateTempView:
		return sqlite.AuthorizerDeny
	case sqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return sqlite.AuthorizerDeny
		}
	}
	return sqlite.AuthorizerOK
}

// sqliteDSN is the driver's name for the database file at path: a URI
// opening an existing file (mode=rw never creates one), waiting on a busy
// database, with foreign keys enforced. The read pool's connections are
// query_only.
func sqliteDSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("mode", "rw")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		q.Set("_txlock", "immediate")
	}
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file://" + escaped + "?" + q.Encode()
}

// sqlitePath answers the file a SQLite connection string names, once it
// is known to be an existing regular file inside dir after cleaning and
// resolving symbolic links. The string is a path (relative ones are
// inside dir), optionally written file:path; it takes no parameters, since
// SQLite's URI parameters choose a VFS, a mode or a cache the runtime
// sets itself. An empty dir refuses every SQLite connection: an
// organization must never open the platform's own database, nor any other
// file. The error never repeats the path.
// organizationDir answers the directory of one organization's SQLite
// files under the deployment's: its ID, as one path element. An ID that is
// not one (empty, ".", "..", or holding a separator) has none, so a
// connection never reaches another organization's files or the
// directory's parent.
func organizationDir(root, org string) string {
	if root == "" || org == "" || org == "." || org == ".." || strings.ContainsAny(org, `/\`+"\x00") || filepath.Base(org) != org {
		return ""
	}
	return filepath.Join(root, org)
}

func sqlitePath(dir, dsn string) (string, error) {
	if dir == "" {
		return "", errors.New("this deployment runs no SQLite connections")
	}
	p := dsn
	if rest, ok := strings.CutPrefix(p, "file:"); ok {
		p = rest
		if rest, ok := strings.CutPrefix(p, "//"); ok {
			if !strings.HasPrefix(rest, "/") {
				return "", errors.New("the SQLite file URI names a host")
			}
			p = rest
		}
	}
	if p == "" || p == ":memory:" || strings.ContainsAny(p, "?#\x00") {
		return "", errors.New("the SQLite connection string is not a plain file path (it takes no parameters)")
	}
	root, err := filepath.EvalSymlinks(dir)
	if err == nil {
		root, err = filepath.Abs(root)
	}
	if err != nil {
		return "", errors.New("the deployment's SQLite directory cannot be resolved")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return "", errors.New("the SQLite file does not exist or cannot be resolved")
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", errors.New("the SQLite file is outside the directory this deployment allows")
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return "", errors.New("the SQLite path is not a regular file")
	}
	return real, nil
}
