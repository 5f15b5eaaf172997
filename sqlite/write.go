package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// Group commit. SQLite takes one writer at a time, and under load most of
// a write's cost is its commit: the pages it changed appended to the WAL
// one by one, the WAL index updated, the locks taken and given back. Calls
// made at once change the same pages again and again (the end of the audit
// table and of its indexes, of the claims table and of its sweep indexes),
// so the store runs the writes that queue while one commits as one
// transaction and commits them once: a page written by several of them is
// appended to the WAL once.
//
// Each write stays atomic and isolated from the others of its group: when
// one fails, the group's transaction is rolled back and the group runs
// again with each write inside a savepoint of its own, so the one that
// fails is rolled back to its savepoint and answers its error, and the
// others go on. (A savepoint per write from the start would cost every
// group two statements a write and a copy of each page it changes, for
// the rare group with a failure.) A write answers only after the group's
// commit, so nothing a caller is told about is less durable than before;
// when the commit fails, every write of the group answers the error, and
// none of them is stored. Writes of a group run in the order they queued,
// and each sees those before it, as if each had committed on its own.
//
// No goroutine of the store's own runs the groups: the first write to find
// none running leads, and when its group is committed hands the lead to the
// first write that queued meanwhile (which leads the next group with every
// write queued by then), so an idle store holds nothing. The leader holds
// the store's write lock (lockWrite) for its group, so transactions that
// do not go through here, a migration and a checkpoint's last pass, still
// exclude it. A write that finds itself alone on an idle store, the one
// caller's case, runs as it would without groups when it can (writeSolo).

// maxGroup bounds the writes of one group: a long group makes its first
// writer wait for the last one's statements.
const maxGroup = 64

// A writeReq is one write waiting for, or in, a group.
type writeReq struct {
	ctx context.Context
	fn  func(context.Context, *sql.Tx) error
	err error
	// done receives true when the write must lead the next group, false
	// when its group is over and err is its answer; nil for a write that
	// led from the start.
	done chan bool
	// taken is set, under the store's group lock, once a leader took the
	// write into its group or made it the next leader; until then a write
	// whose context ends leaves the queue without running.
	taken bool
	// solo, when set, is the same write made outside any transaction of the
	// store's, for when it runs alone on an idle store (see writeSolo).
	solo func(context.Context) error
	// stmt, when set, is the write in place of fn and solo: one statement
	// run with args, in the group's transaction or, alone, on its own,
	// its result left in res (see execOne). A write of one statement so
	// needs no closures, nor its caller's variables moved to the heap for
	// them: four allocations fewer each.
	stmt *sql.Stmt
	args []any
	res  sql.Result
}

// groups is the group commit's state, guarded by mu.
type groups struct {
	mu      sync.Mutex
	queue   []*writeReq
	leading bool
	// conn is the connection the groups run on, held from one group to the
	// next while writes keep queueing, so its page cache, which only its
	// own commits leave valid, stays warm; it goes back to the pool when
	// the queue empties. Only the leader touches it, and last.
	conn *sql.Conn
	// last is how many writes the last group ran.
	last int
}

// write runs fn as one atomic write: fn's statements, run on the tx it is
// given with the ctx it is given, commit together or not at all, and
// write answers fn's error, or the commit's. fn may run in a transaction
// with other writes, so it must not commit or roll back tx, must use the
// ctx it is given (which is not cancelled mid-group: an interrupted
// statement would roll back the writes before it), and must keep its
// effects on the caller's values until write answers nil. fn may run more
// than once, each run but the last rolled back (a write of its group
// failed): each run must set what the caller reads anew. An error from fn
// makes its whole group run again, so an answer a write gives often (a
// row not there, a row changed meanwhile) is better set in a value of
// the caller's than returned as an error.
//
// A write whose ctx ends before its group runs it, or before the group's
// second run when there is one, answers ctx's error and stores nothing.
func (s *Store) write(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	return s.writeSolo(ctx, fn, nil)
}

// writeSolo is write, with solo the same write made by statements that
// each commit on their own (on a pool connection, under the write lock),
// which is what a write that runs alone on an idle store makes: a
// transaction around a single statement, and a connection taken for it,
// cost a lone caller more than the statement itself.
func (s *Store) writeSolo(ctx context.Context, fn func(context.Context, *sql.Tx) error, solo func(context.Context) error) error {
	return s.submit(&writeReq{ctx: ctx, fn: fn, solo: solo})
}

// execOne runs st with args as a write of its own (see write), alone
// outside a transaction when it runs alone on an idle store, and answers
// its result.
func (s *Store) execOne(ctx context.Context, st *sql.Stmt, args []any) (sql.Result, error) {
	r := &writeReq{ctx: ctx, stmt: st, args: args}
	if err := s.submit(r); err != nil {
		return nil, err
	}
	return r.res, nil
}

// submit queues r and answers once its group ran it (see writeSolo).
func (s *Store) submit(r *writeReq) error {
	ctx := r.ctx
	g := &s.groups
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if !g.leading {
		// A write that leads at once is told nothing on done (a leader
		// answers the others of its group, never itself), so it has none.
		g.leading, r.taken = true, true
		g.mu.Unlock()
		s.lead(r)
		return r.err
	}
	r.done = make(chan bool, 1)
	g.mu.Unlock()
	select {
	case lead := <-r.done:
		if lead {
			s.lead(r)
		}
		return r.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !r.taken {
		for i, q := range g.queue {
			if q == r {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return ctx.Err()
	}
	g.mu.Unlock()
	if <-r.done {
		s.lead(r)
	}
	return r.err
}

// lead runs one group, which holds r (the queue's first write), then hands
// the lead on. r's answer is in r.err when it returns.
func (s *Store) lead(r *writeReq) {
	g := &s.groups
	if err := s.lockWrite(r.ctx); err != nil {
		// r waited in vain: it leaves, and the next write leads.
		r.err = err
		g.mu.Lock()
		g.queue = g.queue[1:]
		s.handOn()
		return
	}
	// Under load the writes of calls running now are moments away: yield
	// once, so the goroutines ready to run reach the queue before the group
	// is taken. A lone writer does not yield: a goroutine that yields may
	// resume on another thread, and on a busy machine that thread may wait
	// for a core.
	if g.last > 1 {
		runtime.Gosched()
	}
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	for _, q := range batch {
		q.taken = true
	}
	g.mu.Unlock()
	g.last = n

	s.runGroup(batch)
	s.unlockWrite()
	for _, q := range batch {
		if q != r {
			q.done <- false
		}
	}
	clear(batch)
	g.mu.Lock()
	if len(g.queue) == 0 {
		// The queue is taken from its front, so its capacity shrinks with
		// each group, and a lone writer's append would allocate every
		// time. The group's slots are spent (answered and cleared, and only
		// the leader reads them), so the queue starts again on them.
		g.queue = batch[:0]
	}
	s.handOn()
}

// handOn, called with the group lock held and released by it, makes the
// first queued write the next leader, or, with none queued, ends the lead
// and gives the groups' connection back to the pool.
func (s *Store) handOn() {
	g := &s.groups
	if len(g.queue) == 0 {
		g.leading = false
		conn := g.conn
		g.conn = nil
		g.mu.Unlock()
		if conn != nil {
			conn.Close()
		}
		return
	}
	next := g.queue[0]
	next.taken = true
	g.mu.Unlock()
	next.done <- true
}

// errGroupAborted is the answer of the writes of a group SQLite rolled
// back whole (a full disk, an I/O error): none of them was stored.
var errGroupAborted = errors.New("the transaction of this write and others was rolled back")

// runGroup runs batch as one transaction, under the write lock, and sets
// each write's answer: the writes one after the other, and, when one of a
// group of several fails, all of them again, each in a savepoint.
func (s *Store) runGroup(batch []*writeReq) {
	g := &s.groups
	ctx := detached(batch[0].ctx)
	if q := batch[0]; len(batch) == 1 && (q.solo != nil || q.stmt != nil) && g.conn == nil {
		if q.err = q.ctx.Err(); q.err == nil {
			q.err = runSolo(ctx, q)
		}
		if q.err == nil {
			s.committed(ctx, s.db)
		}
		return
	}
	fail := func(err error) { s.groupFailed(batch, err) }
	if g.conn == nil {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			fail(err)
			return
		}
		g.conn = conn
	}
	tx, err := g.conn.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	if len(batch) == 1 {
		q := batch[0]
		if q.err = q.ctx.Err(); q.err == nil {
			q.err = run(q, tx)
		}
		if q.err != nil {
			tx.Rollback()
			return
		}
	} else if failed := runAll(tx, batch); failed != nil {
		// A write failed, and its statements before the failure are in
		// tx with the others': only a savepoint of its own could take them
		// out alone. The group runs again, each write in a savepoint.
		if err := tx.Rollback(); err != nil {
			// The failure rolled back the whole transaction (a full disk,
			// an I/O error), and with it every write of the group.
			fail(fmt.Errorf("%w: %w", errGroupAborted, errors.Join(failed.err, err)))
			return
		}
		for _, q := range batch {
			q.err = nil
		}
		if tx, err = g.conn.BeginTx(ctx, nil); err != nil {
			fail(err)
			return
		}
		if !s.runSavepoints(ctx, tx, batch) {
			return // the group failed, and its connection is gone
		}
	}
	if stored := slices.ContainsFunc(batch, func(q *writeReq) bool { return q.err == nil }); !stored {
		tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
		return
	}
	s.committed(ctx, g.conn)
}

// runAll runs the writes of batch in tx one after the other, stopping at
// the first that fails, which it answers (nil when none did). Writes
// rarely fail, and a savepoint around each costs two statements more and
// a copy of every page it changes first (SQLite's statement journal), so a
// group runs without them first (see runGroup).
func runAll(tx *sql.Tx, batch []*writeReq) *writeReq {
	for _, q := range batch {
		if q.err = q.ctx.Err(); q.err != nil {
			continue
		}
		if q.err = run(q, tx); q.err != nil {
			return q
		}
	}
	return nil
}

// runSavepoints runs the writes of batch in tx, each in a savepoint of its
// own, and sets the answer of each that fails. It reports false when the
// transaction could not go on, having rolled it back and set every write's
// answer.
func (s *Store) runSavepoints(ctx context.Context, tx *sql.Tx, batch []*writeReq) bool {
	fail := func(err error) bool {
		tx.Rollback()
		s.groupFailed(batch, err)
		return false
	}
	var savepoint, rollbackTo, release *sql.Stmt
	for _, st := range []struct {
		query string
		to    **sql.Stmt
	}{{`SAVEPOINT write`, &savepoint}, {`ROLLBACK TO write`, &rollbackTo}, {`RELEASE write`, &release}} {
		prepared, err := s.prepared(ctx, st.query)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", errGroupAborted, err))
		}
		*st.to = tx.StmtContext(ctx, prepared)
	}
	for _, q := range batch {
		if q.err = q.ctx.Err(); q.err != nil {
			continue
		}
		if _, err := savepoint.ExecContext(ctx); err != nil {
			return fail(fmt.Errorf("%w: savepoint: %w", errGroupAborted, err))
		}
		if q.err = run(q, tx); q.err != nil {
			// Some errors roll back the whole transaction; then the
			// savepoint is gone, and so are the writes before this one.
			if _, err := rollbackTo.ExecContext(ctx); err != nil {
				return fail(fmt.Errorf("%w: %w", errGroupAborted, q.err))
			}
		}
		if _, err := release.ExecContext(ctx); err != nil {
			return fail(fmt.Errorf("%w: release: %w", errGroupAborted, err))
		}
	}
	return true
}

// run runs q's write in tx. A write that panics answers an error instead,
// so that its leader still ends the group and hands the lead on: a panic
// recovered further up (net/http recovers a handler's) would otherwise
// leave every later write of the store waiting.
func run(q *writeReq, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	ctx := detached(q.ctx)
	if q.stmt != nil {
		q.res, err = tx.StmtContext(ctx, q.stmt).ExecContext(ctx, q.args...)
		return err
	}
	return q.fn(ctx, tx)
}

// detached answers ctx without its cancellation and deadline, as
// context.WithoutCancel does, but answers ctx itself when it has neither
// (its Done is nil, as for a context a caller detached already, which the
// journal's dispatch mark and completion are given): WithoutCancel
// allocates a context each time, and a write call runs several writes.
func detached(ctx context.Context) context.Context {
	if ctx.Done() == nil && ctx.Err() == nil {
		if _, ok := ctx.Deadline(); !ok {
			return ctx
		}
	}
	return context.WithoutCancel(ctx)
}

// runSolo runs a write alone, outside a transaction of the store's: its
// statement, or its solo form; a panic included in its answer as in
// run.
func runSolo(ctx context.Context, q *writeReq) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	if q.stmt != nil {
		q.res, err = q.stmt.ExecContext(ctx, q.args...)
		return err
	}
	return q.solo(ctx)
}

// groupFailed sets the answer of every write of batch not yet answered to
// err, and gives up the groups' connection, whose state is not known.
func (s *Store) groupFailed(batch []*writeReq, err error) {
	for _, q := range batch {
		if q.err == nil {
			q.err = err
		}
	}
	if g := &s.groups; g.conn != nil {
		g.conn.Close()
		g.conn = nil
	}
}
