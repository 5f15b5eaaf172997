// Package sqlruntime is the sql runtime: a tool whose definition binds a SQL
// statement (binding.sql) is answered by running that one statement on the
// database behind the connection the broker releases for the call
// (PostgreSQL, SQLite or MySQL/MariaDB, as the connection's driver says).
//
// Arguments are bound as parameters only. The statement's :name
// parameters are found once, in the tool's own text, and replaced by the
// driver's placeholders; nothing an argument holds ever becomes statement
// text.
//
// A read runs in a read-only transaction (a query_only connection for
// SQLite) and answers at most MaxRows rows, saying when it cut them. A
// write runs in one transaction of its own. How a failed write ends is
// decided by what is known to have reached the database, so that a call
// never takes effect twice:
//
//   - a failure before the statement was sent (no connection, refused
//     connection string) made no effect: the claim is released;
//   - the statement failed, or the time ran out, before COMMIT was sent:
//     the transaction is rolled back (the server also rolls back a
//     transaction whose session is lost), so nothing was committed. A
//     constraint violation is the database's definite answer (conflict or
//     invalid_input); anything else releases the claim;
//   - COMMIT was sent and the server answered it with an error: nothing
//     was committed, a definite failure;
//   - COMMIT was sent and its answer was lost (the connection broke, the
//     time ran out): the change may have been made, and the call is
//     uncertain until a person reconciles it.
//
// So a write's transient failures, all rolled back, are declared safe to
// attempt again within the call (handler.WithTransactionalAttempts): the
// invoker's retry loop may run the statement again, under the same claim,
// after a deadlock, a serialization failure, a busy database or a lost
// connection, when the tool's execution block allows more than one
// attempt; an uncertain COMMIT never is. A read is attempted again only
// when its definition says retry: safe.
//
// A write's COMMIT is not cut by the call's deadline: it runs under a
// grace period of its own, and a write binding declares a settlement
// window, so a commit that answers after the invoker stopped waiting still
// settles the uncertain action it left. These guarantees hold for
// transactional tables; a MySQL table of a non-transactional engine
// (MyISAM) changes as its statement runs, whatever becomes of the
// transaction.
//
// The connection string is secret: no error, log line or answer holds it
// or any part of it. Errors name the connection by ID.
package sqlruntime

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/tracectx"
)

// Config configures a Runtime.
type Config struct {
	// Dial, when set, answers how a connection's pool dials its
	// PostgreSQL or MySQL server: the wiring gives one that checks that
	// connection's egress rules when it dials. The dial is handed the
	// host the connection names, not an address the driver resolved.
	Dial func(c *toolplane.Connection) (func(ctx context.Context, network, addr string) (net.Conn, error), error)
	// SQLiteDir holds the SQLite files connections may open: each
	// organization's in a directory of its own, named by its ID
	// (SQLiteDir/<organization>/shop.db), so one organization never opens
	// another's. Paths are checked after cleaning and resolving symbolic
	// links. Empty refuses every SQLite connection. It must not hold the
	// platform's own database.
	SQLiteDir string
	// StatementTimeout bounds one statement; zero is
	// DefaultStatementTimeout. A call's own deadline shortens it.
	StatementTimeout time.Duration
	// MaxOpenConns bounds each connection's pool; zero is
	// DefaultMaxOpenConns.
	MaxOpenConns int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger tells the operator of connections refused or allowed for
	// their database role's powers, and of statements that could not be
	// stopped; nil discards.
	Logger *slog.Logger
}

// The defaults of Config.
const (
	DefaultStatementTimeout = 30 * time.Second
	DefaultMaxOpenConns     = 4
)

// commitGrace is how long a write's COMMIT may take beyond the call's
// deadline; the settlement window covers it.
const commitGrace = 10 * time.Second

// Runtime runs SQL-bound tools. Its pools are cached per connection
// version and closed by Close.
type Runtime struct {
	cfg Config

	mu     sync.Mutex
	pools  map[poolKey]*pool
	latest map[string]int64
	closed bool
	// closing counts pools being closed after their connection rotated.
	closing sync.WaitGroup
}

// New answers a runtime configured by cfg.
func New(cfg Config) *Runtime {
	if cfg.StatementTimeout <= 0 {
		cfg.StatementTimeout = DefaultStatementTimeout
	}
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = DefaultMaxOpenConns
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runtime{cfg: cfg, pools: map[poolKey]*pool{}, latest: map[string]int64{}}
}

// Close closes every pool and refuses calls from then on.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	var err error
	for k, p := range r.pools {
		err = errors.Join(err, p.close())
		delete(r.pools, k)
	}
	r.mu.Unlock()
	r.closing.Wait()
	return err
}

// binding is one definition's statement, ready for every driver.
type binding struct {
	rt      *Runtime
	tool    string
	writes  bool
	maxRows int
	// price is the tool's price (see charge).
	price *toolplane.Price
	// byDialect holds the statement translated for each driver.
	byDialect map[dialect]translated
}

// Bind builds the handler binding of d, which must bind a SQL statement
// that passes Check (an error wrapping toolplane.ErrInvalid otherwise).
// Its key is sql:<name>@<version>. The caller caches it.
func (r *Runtime) Bind(d *toolplane.Definition) (*handler.Binding, error) {
	if d.Binding.SQL == nil {
		return nil, fmt.Errorf("%w: %s binds no SQL statement", toolplane.ErrInvalid, d.Name)
	}
	scans, problems := compile(d)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s: %s", toolplane.ErrInvalid, d.Name, problems[0])
	}
	return r.bindScanned(d, scans)
}

// Contract answers the runtime's contract: Checks, binding with r.
func (r *Runtime) Contract() handler.Runtime { return Checks().BindWith(r.Bind) }

// bindScanned builds the binding of d from its statement as scanned for
// every dialect.
func (r *Runtime) bindScanned(d *toolplane.Definition, scans map[dialect]scanned) (*handler.Binding, error) {
	b := &binding{rt: r, tool: d.Name, writes: d.Writes(), maxRows: d.Binding.SQL.MaxRows, price: d.Price, byDialect: map[dialect]translated{}}
	if b.maxRows == 0 {
		b.maxRows = DefaultMaxRows
	}
	for _, dl := range dialects {
		s, ok := scans[dl]
		if !ok {
			return nil, fmt.Errorf("%w: %s: the statement was not read as %s", toolplane.ErrInvalid, d.Name, dl)
		}
		b.byDialect[dl] = translate(d.Binding.SQL.Statement, s, dl)
	}
	// The database is behind the connection a call goes through, known
	// only once it is released, after the breaker is asked: the target is
	// the connection provider, as for an HTTP tool sent under a base URL.
	opts := []handler.Option{handler.WithContextBound(), handler.WithTarget("database:" + d.Connection)}
	if b.writes {
		// A write's transient failures (a busy database, a deadlock, a
		// serialization failure, a statement past its time, a connection
		// lost before COMMIT) end in a rollback, so they made no effect
		// and the invoker may attempt the write again; a COMMIT whose
		// answer was lost is uncertain and never attempted again.
		opts = append(opts, handler.WithSettlement(commitGrace+time.Second), handler.WithTransactionalAttempts())
	}
	return handler.BindFunc("sql:"+d.Name+"@"+d.Version, b.call, nil, opts...)
}

// call is the handler body.
func (b *binding) call(ctx context.Context, call handler.Call, args any) (any, error) {
	rel := call.Released
	if rel == nil || rel.Connection == nil {
		return nil, fmt.Errorf("sql tool %s ran without a released connection", b.tool)
	}
	id := rel.Connection.ID
	d, ok := dialectOf(rel.Connection.Config.Driver)
	if !ok {
		return nil, handler.Explain(toolplane.CodeUnavailable, "connection "+id+" names no database driver this deployment runs (postgres, sqlite or mysql); nothing was done").Err()
	}
	st := b.byDialect[d]
	values := bindValues(st.binds, args)
	p, done, err := b.rt.acquire(rel, d)
	var ref *refusal
	switch {
	case errors.As(err, &ref):
		return nil, handler.Explain(toolplane.CodeUnavailable, ref.msg+"; nothing was done").Err()
	case err != nil:
		if dr := destinationRefused(err); dr != nil {
			return nil, dr
		}
		return nil, &handler.Unavailable{Err: err}
	}
	defer done()
	timeout := b.rt.budget(ctx)
	if timeout <= 0 {
		return nil, handler.Explain(toolplane.CodeRetryableUpstream, "too little of the call's time was left to run the statement; nothing was done").Err()
	}
	x := &exec{b: b, p: p, id: id, secrets: secretsOf(d, rel.Secrets.DSN), st: st, values: values, timeout: timeout}
	if !p.vetted.Load() {
		// The pool's first call inspects its role, within the call's time;
		// a role accepted once is not inspected again, and later calls
		// pay nothing for it.
		vctx, vcancel := context.WithTimeout(ctx, timeout)
		err = b.rt.vet(vctx, p, rel.Connection)
		vcancel()
		var priv *PrivilegedRoleError
		switch {
		case errors.As(err, &priv):
			return nil, handler.Explain(toolplane.CodeUnavailable, "the database role behind connection "+id+" holds powers beyond its data, which toolplane refuses until an operator connects it with a least-privilege role; nothing was done").Err()
		case err != nil:
			return nil, x.unsent(err)
		}
		// The statement runs in what the inspection left of the call's time.
		if x.timeout = b.rt.budget(ctx); x.timeout <= 0 {
			return nil, handler.Explain(toolplane.CodeRetryableUpstream, "too little of the call's time was left to run the statement; nothing was done").Err()
		}
	}
	var out any
	if b.writes {
		out, err = x.write(ctx)
	} else {
		out, err = x.read(ctx)
	}
	if err == nil {
		b.charge(ctx, out)
	}
	return out, err
}

// charge reports a priced call's cost: the fixed price, or the sum of the
// price column over the rows the call answers (no row costs nothing; a
// row without the column is a meter fault).
func (b *binding) charge(ctx context.Context, out any) {
	if b.price == nil {
		return
	}
	if b.price.Field == "" {
		handler.Charge(ctx, b.price)
		return
	}
	m, _ := out.(map[string]any)
	rows, _ := m["rows"].([]any)
	stated := []any{int64(0)}
	for _, r := range rows {
		row, _ := r.(map[string]any)
		stated = append(stated, column(row, b.price.Field))
	}
	handler.Charge(ctx, b.price, stated...)
}

// column answers a row's value of col: the column of that name, or else
// the one whose name matches it but for case (a database that folds
// unquoted names), nil when there is none.
func column(row map[string]any, col string) any {
	if v, ok := row[col]; ok {
		return v
	}
	for name, v := range row {
		if strings.EqualFold(name, col) {
			return v
		}
	}
	return nil
}

// budget answers how long the statement may run: the configured timeout,
// shortened to leave a tenth of the call's remaining time (at most a
// second) for the answer to travel back before the deadline.
func (r *Runtime) budget(ctx context.Context) time.Duration {
	t := r.cfg.StatementTimeout
	if dl, ok := ctx.Deadline(); ok {
		left := dl.Sub(r.cfg.Now())
		left -= min(left/10, time.Second)
		t = min(t, left)
	}
	return t
}

// exec is one call's run of a statement.
type exec struct {
	b       *binding
	p       *pool
	id      string
	secrets []string
	st      translated
	values  []any
	timeout time.Duration
}

// read runs a query in a read-only transaction and answers its rows, at
// most maxRows of them.
func (x *exec) read(ctx context.Context) (any, error) {
	sctx, cancel := context.WithTimeout(ctx, x.timeout)
	defer cancel()
	conn, err := x.p.reader().Conn(sctx)
	if err != nil {
		return nil, x.unsent(err)
	}
	defer conn.Close()
	defer x.p.reset(ctx, conn)
	tx, err := conn.BeginTx(sctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, x.unsent(err)
	}
	defer tx.Rollback() // a read commits nothing
	text, stop, err := x.limit(sctx, tx)
	if err != nil {
		return nil, x.failed(err, false)
	}
	defer stop()
	rows, err := tx.QueryContext(sctx, text, x.values...)
	if err != nil {
		stop()
		return nil, x.failed(err, false)
	}
	out, n, cut, err := collect(rows, x.b.maxRows, false)
	stop()
	if err != nil {
		return nil, x.failed(err, false)
	}
	return map[string]any{"rows": out, "row_count": json64(n), "truncated": cut}, nil
}

// write runs a change in a transaction of its own and commits it. See the
// package documentation for how each failure ends.
func (x *exec) write(ctx context.Context) (any, error) {
	sctx, cancel := context.WithTimeout(ctx, x.timeout)
	defer cancel()
	conn, err := x.p.db.Conn(sctx)
	if err != nil {
		return nil, x.unsent(err)
	}
	defer conn.Close()
	defer x.p.reset(ctx, conn)
	// The transaction's own context outlives the call's deadline by the
	// commit grace: database/sql rolls a transaction back when its context
	// ends, which must not happen between COMMIT sent and answered.
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), x.timeout+commitGrace)
	defer tcancel()
	tx, err := conn.BeginTx(tctx, nil)
	if err != nil {
		return nil, x.unsent(err)
	}
	ended := false
	defer func() {
		if !ended {
			tx.Rollback()
		}
	}()
	text, stop, err := x.limit(sctx, tx)
	if err != nil {
		return nil, x.failed(err, true)
	}
	defer stop()
	answer := map[string]any{}
	if x.st.returnsRows {
		rows, err := tx.QueryContext(sctx, text, x.values...)
		if err != nil {
			return nil, x.failed(err, true)
		}
		out, n, cut, err := collect(rows, x.b.maxRows, true)
		if err != nil {
			return nil, x.failed(err, true)
		}
		answer["rows"], answer["rows_affected"] = out, json64(n)
		if cut {
			answer["truncated"] = true
		}
	} else {
		res, err := tx.ExecContext(sctx, text, x.values...)
		if err != nil {
			return nil, x.failed(err, true)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, x.failed(err, true)
		}
		answer["rows_affected"] = json64(n)
	}
	// Past this line COMMIT may be sent. Before it, a call whose time ran
	// out is rolled back: nothing was committed, and that is certain. No
	// KILL QUERY may be sent from here on: one that began has ended, and
	// then the time ran out.
	stop()
	if err := sctx.Err(); err != nil {
		return nil, x.failed(err, true)
	}
	if err := tctx.Err(); err != nil {
		return nil, x.failed(err, true)
	}
	ended = true
	if err := tx.Commit(); err != nil {
		if e := inspect(err, x.secrets); e.answered {
			return nil, x.ending(e, "the database refused to commit the change; nothing was committed")
		}
		return nil, handler.Uncertain("the change was sent to commit on connection " + x.id + " and the database's answer was lost; it may have been made").Err()
	}
	return answer, nil
}

// limit bounds the statement on the server itself, with the platform's
// number, never an argument's, and answers the text to run and a stop
// for what it set up. A statement's context alone does not stop it on
// every server: the MySQL driver closes its connection when the context
// ends, and the server goes on running the statement until it next
// writes to the lost client (a SLEEP, a long scan: for as long as it
// runs). So:
//
//   - PostgreSQL: the transaction's statement_timeout (and pgx sends a
//     cancel request when the context ends);
//   - MariaDB: SET STATEMENT max_statement_time=... FOR the statement;
//   - MySQL: the session's max_execution_time, which bounds a SELECT
//     (the session is closed after the call, so it lasts for this one);
//   - MySQL and MariaDB both: when the context ends first, KILL QUERY
//     from another session, which the call waits for (bounded by
//     killTimeout) before it answers;
//   - SQLite: the driver interrupts the statement when the context ends.
//
// stop must be called once the statement's answer is read, and, for a
// write, before COMMIT is sent: a kill must never reach a COMMIT.
func (x *exec) limit(ctx context.Context, tx *sql.Tx) (text string, stop func(), err error) {
	text, stop = x.st.text, func() {}
	tp := tracectx.SQLComment(ctx)
	switch x.p.dialect {
	case dialectPostgres:
		// pgx keeps each connection's statements prepared by their text:
		// a comment naming the call's trace would make every statement
		// new, prepared again and evicting the others. The trace rides
		// instead on the transaction's first statement, sent without
		// arguments over the simple protocol, which nothing caches.
		ms := max(x.timeout.Milliseconds(), 1)
		set := "SET LOCAL statement_timeout = " + strconv.FormatInt(ms, 10)
		if tp != "" {
			set += " " + tp
		}
		_, err = tx.ExecContext(ctx, set)
		return text, stop, err
	case dialectMySQL:
		// The MySQL driver prepares a statement with arguments for the
		// one call and closes it (and SQLite's prepares each call's
		// anew): a comment costs no cached statement there.
		text = commented(text, tp)
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return "", nil, err
		}
		if x.p.mariadb {
			secs := strconv.FormatFloat(max(x.timeout.Seconds(), 0.001), 'f', 3, 64)
			text = "SET STATEMENT max_statement_time=" + secs + " FOR " + text
		} else {
			ms := max(x.timeout.Milliseconds(), 1)
			if _, err := tx.ExecContext(ctx, "SET SESSION max_execution_time = "+strconv.FormatInt(ms, 10)); err != nil {
				return "", nil, err
			}
		}
		return text, x.killOnEnd(ctx, id), nil
	}
	return commented(text, tp), stop, nil
}

// commented answers text with comment (see tracectx.SQLComment) on a line
// of its own after the statement, before any trailing semicolon: after a
// line comment the statement may end with, never inside it, and with the
// placeholders before it numbered as they were.
func commented(text, comment string) string {
	if comment == "" {
		return text
	}
	body := strings.TrimRight(text, " \t\r\n;")
	return body + "\n" + comment + text[len(body):]
}

// killTimeout bounds a KILL QUERY, and how long a call waits for it.
const killTimeout = 3 * time.Second

// killOnEnd sends KILL QUERY for the session id from the pool's control
// session when ctx ends before the returned stop is called. stop cancels
// it, or, when it already began, waits for it to end, so a call answers
// only once its statement was told to stop. It is safe to call twice.
func (x *exec) killOnEnd(ctx context.Context, id int64) (stop func()) {
	done := make(chan struct{})
	cancel := context.AfterFunc(ctx, func() {
		defer close(done)
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer kcancel()
		if _, err := x.p.ctl.ExecContext(kctx, "KILL QUERY "+strconv.FormatInt(id, 10)); err != nil {
			// An unknown thread (1094) is a statement that ended first.
			x.b.rt.cfg.Logger.Warn("a SQL statement that ran out of time could not be stopped on the server",
				"connection", x.id, "tool", x.b.tool, "err", inspect(err, x.secrets).kind.String())
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			if !cancel() {
				<-done
			}
		})
	}
}

// unsent ends a call that failed before its statement was sent: nothing
// happened.
func (x *exec) unsent(err error) error {
	if dr := destinationRefused(err); dr != nil {
		return dr
	}
	e := inspect(err, x.secrets)
	switch e.kind {
	case failTimeout:
		return handler.Explain(toolplane.CodeRetryableUpstream, "the database behind connection "+x.id+" did not answer in time; nothing was done").Err()
	case failRetry:
		return handler.Explain(toolplane.CodeRetryableUpstream, "the database behind connection "+x.id+" is busy; nothing was done; try again shortly").Err()
	case failDenied:
		return handler.Explain(toolplane.CodeUnavailable, "the database behind connection "+x.id+" refused the connection's credentials; nothing was done").Err()
	}
	return &handler.Unavailable{Err: fmt.Errorf("connection %s: cannot reach the database (%s)", x.id, e.kind)}
}

// destinationRefused answers the handler's refusal of a destination when
// the connection's egress rules refused the database's address as the
// pool dialed it, and nil otherwise.
func destinationRefused(err error) error {
	var re *egress.RefusedError
	if !errors.As(err, &re) {
		return nil
	}
	return &handler.DestinationRefused{Host: re.Host, Addr: re.Addr, Rule: re.Rule}
}

// failed ends a call whose statement failed before any COMMIT was sent:
// the transaction is rolled back, so nothing was committed.
func (x *exec) failed(err error, write bool) error {
	nothing := "nothing was changed"
	if write {
		nothing = "nothing was committed"
	}
	return x.ending(inspect(err, x.secrets), nothing)
}

// ending turns what is known of a database error into the call's end,
// saying what became of the change (nothing).
func (x *exec) ending(e dbError, nothing string) error {
	quote := func(lead string) string {
		if e.message == "" {
			return lead + "; " + nothing
		}
		return lead + ": " + e.message + "; " + nothing
	}
	switch e.kind {
	case failConflict:
		return &handler.Conflict{Message: quote("the database refused the change as conflicting with its data")}
	case failInvalid:
		return &handler.Invalid{Message: quote("the database refused the values")}
	case failTimeout:
		return handler.Explain(toolplane.CodeRetryableUpstream, fmt.Sprintf("the statement ran past its time limit of %v and was stopped; %s", x.timeout.Round(time.Millisecond), nothing)).Err()
	case failRetry:
		return handler.Explain(toolplane.CodeRetryableUpstream, quote("the database could not run the statement now")).Err()
	case failReadOnly:
		if !x.b.writes {
			return handler.Explain(toolplane.CodeUnavailable, "the tool's statement tried to change data, which a read tool may not do; "+nothing).Err()
		}
		return handler.Explain(toolplane.CodeUnavailable, quote("the database behind connection "+x.id+" is read-only")).Err()
	case failDenied:
		return handler.Explain(toolplane.CodeUnavailable, quote("the database behind connection "+x.id+" does not allow the statement")).Err()
	case failDefinition:
		return handler.Explain(toolplane.CodeUnavailable, quote("the tool's statement does not fit the database behind connection "+x.id)).Err()
	case failConnection:
		return &handler.Unavailable{Err: fmt.Errorf("connection %s: the connection to the database was lost; %s", x.id, nothing)}
	}
	return handler.Explain(toolplane.CodeUnavailable, quote("the database behind connection "+x.id+" failed the statement")).Err()
}
