package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// A chainer assigns events their place in their organizations' chains
// inside one write transaction and stores them (append): it finds where
// an organization's chain stands once, advances it in memory for each
// event it seals, and records the organizations it saw (save) before the
// transaction commits. SQLite has one writer at a time, so what the
// transaction reads is the head.
type chainer struct {
	s     *Store
	ctx   context.Context
	tx    *sql.Tx
	heads map[string]*toolplane.AuditHead
	// order is the organizations whose chains moved, in the order they
	// first did.
	order []string
	// shapes are the transaction's inserts, each for events of one shape
	// (see auditShape), the last few a chainer used: events of one write
	// mostly share theirs.
	shapes [4]shapeStmt
	// nextShape is the entry of shapes a new shape takes.
	nextShape int
	// many is set when the chainer appends more than one event (a batch):
	// only then does it keep the heads its events moved.
	many bool
}

func (s *Store) newChainer(ctx context.Context, tx *sql.Tx) *chainer {
	return &chainer{s: s, ctx: ctx, tx: tx}
}

const (
	// lastAuditEvent is where a chain stands: its newest event, found by
	// the (organization_id, seq) index.
	lastAuditEvent = `SELECT seq, hash FROM audit_events WHERE organization_id = ? AND seq > 0 ORDER BY seq DESC LIMIT 1`
	// lastAuditCheckpoint is where it stands when retention dropped every
	// event: the checkpoint retention wrote at the end of the range.
	lastAuditCheckpoint = `SELECT seq, hash FROM audit_checkpoints WHERE organization_id = ? ORDER BY seq DESC LIMIT 1`
	// registerAuditOrganization changes no page once the organization is
	// known.
	registerAuditOrganization = `INSERT INTO audit_organizations (organization_id) VALUES (?) ON CONFLICT DO NOTHING`
)

// insertAuditAfter is insertAudit on the condition that the chain's
// newest event is the one given: an event chained on where this node
// last left the chain is stored only if the chain is still there,
// checked by the statement that stores it, with no read before it.
// When it is not, the event's seq is NULL, which the column refuses
// (SQLITE_CONSTRAINT_NOTNULL), and nothing is stored. Its arguments
// are insertAudit's but for the last three, which follow the
// condition's (the organization, the event's own number, one past the
// newest event's, and its PrevHash, the newest event's hash: the
// values its own columns are given, so they are boxed once): see
// chainer.appendHinted. (A condition in an INSERT … SELECT
// reading the table it inserts into would have SQLite copy the row to
// a temporary table first; numbered parameters cost the driver a
// string a parameter.)
var insertAuditAfter = `INSERT INTO audit_events (` + auditColumns + `)
	VALUES (` + auditValues(auditArgCount-3, 0) + `,` + insertAfterCondition

// insertAfterCondition is the end of insertAuditAfter: the chain's
// columns, the first on its condition.
const insertAfterCondition = `
	CASE WHEN (SELECT seq, hash FROM audit_events WHERE organization_id = ? AND seq > 0 ORDER BY seq DESC LIMIT 1) = (? - 1, ?)
	THEN ? END, ?, ?)`

// chainArgCount is how many arguments insertAuditAfter takes.
const chainArgCount = auditArgCount + 3

// argsRoom is the length of the room an event's insert is given for its
// arguments: chainArgCount for them all (setAuditArgs), as many again for
// those its statement binds (chainer.insert).
const argsRoom = 2 * chainArgCount

// lastHeads is where this store last chained each organization: a hint
// that saves a write the read of the head, never taken on trust (see
// chainer.append). It is bounded; past maxHeads it starts over.
type lastHeads struct {
	mu sync.Mutex
	m  map[string]lastHead
}

type lastHead struct {
	seq  int64
	hash [auditchain.HashSize]byte
}

const maxHeads = 100_000

func (l *lastHeads) get(org string) (lastHead, bool) {
	l.mu.Lock()
	h, ok := l.m[org]
	l.mu.Unlock()
	return h, ok
}

func (l *lastHeads) put(org string, seq int64, hash []byte) {
	if len(hash) != auditchain.HashSize {
		return
	}
	h := lastHead{seq: seq}
	copy(h.hash[:], hash)
	l.mu.Lock()
	if l.m == nil || len(l.m) >= maxHeads {
		l.m = make(map[string]lastHead)
	}
	l.m[org] = h
	l.mu.Unlock()
}

// readHead answers where org's chain stands, and whether its newest event
// says so (then the organization is registered already: the write that
// stored that event registered it). query answers a query's row.
func readHead(ctx context.Context, query func(ctx context.Context, q string, args ...any) (*sql.Row, error), org string) (toolplane.AuditHead, bool, error) {
	var h toolplane.AuditHead
	for i, q := range []string{lastAuditEvent, lastAuditCheckpoint} {
		row, err := query(ctx, q, org)
		if err != nil {
			return h, false, fmt.Errorf("audit chain head: %w", err)
		}
		err = row.Scan(&h.Seq, &h.Hash)
		if err == nil {
			return h, i == 0, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return h, false, fmt.Errorf("audit chain head: %w", err)
		}
	}
	return h, false, nil
}

// txRow answers a query's row on tx, by the store's prepared statement.
func (c *chainer) txRow(ctx context.Context, q string, args ...any) (*sql.Row, error) {
	st, err := c.s.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	return c.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...), nil
}

// A shapeStmt is a chainer's insert for events of one shape.
type shapeStmt struct {
	key uint64
	st  *sql.Stmt
}

// insert answers the statement storing an event whose arguments
// (setAuditArgs) are args, its first n, and the arguments it binds, kept
// in bound: the statement of the event's shape (auditShape), guarded
// (insertAuditAfter) or not, which holds the event's empty and zero
// values itself. bound has room for n.
func (c *chainer) insert(args, bound []any, n int, guarded bool) (*sql.Stmt, []any, error) {
	mask := auditShape(args)
	key := mask << 1
	if guarded {
		key |= 1
	}
	q, ok := c.s.auditShapes.query(key)
	if !ok {
		// One shape too many: the statement binding every argument.
		mask, key = 0, 1<<63|key&1
		q = insertAudit
		if guarded {
			q = insertAuditAfter
		}
	}
	bound = bound[:0]
	for i, a := range args[:n] {
		if i >= auditArgCount || mask&(1<<i) == 0 {
			bound = append(bound, a)
		}
	}
	for _, sh := range c.shapes {
		if sh.st != nil && sh.key == key {
			return sh.st, bound, nil
		}
	}
	st, err := c.s.prepared(c.ctx, q)
	if err != nil {
		return nil, nil, err
	}
	if c.tx != nil {
		st = c.tx.StmtContext(c.ctx, st)
	}
	c.shapes[c.nextShape] = shapeStmt{key: key, st: st}
	c.nextShape = (c.nextShape + 1) % len(c.shapes)
	return st, bound, nil
}

// append seals e as the next event of its organization, after
// normalizing its JSON documents (see auditchain.Normalize), and inserts
// it; args, when not nil, is room for the insert's arguments
// (argsRoom: chainArgCount, see setAuditArgs, then as many for those a
// statement binds).
//
// An organization's first event in a transaction is chained where this
// store last left the chain (lastHeads), by an insert that holds only if
// the chain's newest event is still that one: so no statement reads the
// head first. When it is not (another process's write, a write rolled
// back, a restart: the hint is only a hint), the head is read and the
// event sealed and inserted again. Either way the event follows the
// transaction's own head, as reading it first would make it.
func (c *chainer) append(e *toolplane.AuditEvent, args []any) error {
	if args == nil {
		kept := c.s.auditArgs.take()
		if kept != nil {
			defer c.s.auditArgs.give()
			args = kept
		} else {
			args = make([]any, argsRoom)
		}
	}
	auditchain.Normalize(e)
	org := e.OrganizationID
	h, ok := c.heads[org]
	if !ok {
		stored, err := c.appendHinted(e, args)
		if stored || err != nil {
			return err
		}
		head, known, err := readHead(c.ctx, c.txRow, org)
		if err != nil {
			return err
		}
		h = &head
		if !known {
			c.order = append(c.order, org)
		}
	}
	auditchain.Seal(e, h.Seq+1, h.Hash)
	setAuditArgs(args, e)
	st, bound, err := c.insert(args, args[chainArgCount:], auditArgCount, false)
	if err != nil {
		return err
	}
	if _, err := st.ExecContext(c.ctx, bound...); err != nil {
		return err
	}
	c.moved(org, h, e)
	return nil
}

// appendHinted stores e, normalized, as the next event of its
// organization when the store chained it last (lastHeads) and the chain
// still ends where the store left it, by one statement that reads no head
// first (see append). It reports whether e was stored; false with a nil
// error when there was no hint or the chain had moved on (then nothing
// was stored, and e is sealed again by its caller). It needs no
// transaction: the statement alone is the write.
func (c *chainer) appendHinted(e *toolplane.AuditEvent, args []any) (bool, error) {
	org := e.OrganizationID
	last, hinted := c.s.chainHeads.get(org)
	if !hinted {
		return false, nil
	}
	auditchain.Seal(e, last.seq+1, last.hash[:])
	setAuditArgs(args, e)
	const at = auditArgCount - 3 // the chain's own columns, last
	seq, prevHash, hash := args[at], args[at+1], args[at+2]
	// args[0] is the organization, boxed already.
	args[at], args[at+1], args[at+2] = args[0], seq, prevHash
	args[at+3], args[at+4], args[at+5] = seq, prevHash, hash
	st, bound, err := c.insert(args, args[chainArgCount:], chainArgCount, true)
	if err != nil {
		return false, err
	}
	_, err = st.ExecContext(c.ctx, bound...)
	if err == nil {
		c.moved(org, nil, e)
		return true, nil
	}
	if !isNotNull(err) {
		return false, err
	}
	// The chain moved on without this store: the caller reads where it is.
	return false, nil
}

// auditArgs is room for the audit insert's arguments (argsRoom),
// kept from one event to the next: a value equal to the last event's
// keeps its boxed copy (see setAuditArgs), so the fields that repeat from
// call to call (the organization, agent, tool, outcome, hashes of the same
// arguments) are not boxed again for every event stored alone. One writer
// at a time holds it; another finds it taken and makes its own.
type auditArgs struct {
	mu   sync.Mutex
	args []any
}

// take answers the kept arguments, to be given back (give), or nil when
// another writer holds them.
func (a *auditArgs) take() []any {
	if !a.mu.TryLock() {
		return nil
	}
	if a.args == nil {
		a.args = make([]any, argsRoom)
	}
	return a.args
}

// give gives the arguments back, without the event's documents and
// chain hashes, which are the event's own and may be large: they are
// not kept alive past their insert.
func (a *auditArgs) give() {
	for _, i := range [...]int{argPolicyInput, argArguments, auditArgCount - 2, auditArgCount - 1, auditArgCount, auditArgCount + 1, auditArgCount + 2} {
		a.args[i] = nil
	}
	// The arguments last bound: the same values, the documents among them.
	clear(a.args[chainArgCount:])
	a.mu.Unlock()
}

// isNotNull reports whether err is a NOT NULL constraint's refusal.
func isNotNull(err error) bool {
	var e *modernc.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_NOTNULL
}

// moved records that org's chain now ends at e, whose head was h (nil:
// none read yet).
func (c *chainer) moved(org string, h *toolplane.AuditHead, e *toolplane.AuditEvent) {
	c.s.chainHeads.put(org, e.Seq, e.Hash)
	if !c.many {
		// No other event follows in this chainer's write: nothing reads
		// the head again.
		return
	}
	if h == nil {
		h = new(toolplane.AuditHead)
	}
	h.Seq, h.Hash = e.Seq, e.Hash
	if c.heads == nil {
		c.heads = make(map[string]*toolplane.AuditHead, 1)
	}
	c.heads[org] = h
}

// save registers the organizations whose chains started (or restarted
// after retention) in this write.
func (c *chainer) save() error {
	if len(c.order) == 0 {
		return nil
	}
	st, err := c.s.prepared(c.ctx, registerAuditOrganization)
	if err != nil {
		return fmt.Errorf("audit chain organization: %w", err)
	}
	txst := c.tx.StmtContext(c.ctx, st)
	for _, org := range c.order {
		if _, err := txst.ExecContext(c.ctx, org); err != nil {
			return fmt.Errorf("audit chain organization: %w", err)
		}
	}
	return nil
}

// AuditChain answers the organization's chained events with from <= Seq
// <= to (to 0: no bound), in Seq order, at most limit.
func (s *Store) AuditChain(ctx context.Context, org string, from, to int64, limit int) ([]toolplane.AuditEvent, error) {
	return s.AppendAuditChain(ctx, nil, org, from, to, limit)
}

// AppendAuditChain appends to dst what AuditChain answers: a verification
// reads its pages into the memory of the pages it walked.
func (s *Store) AppendAuditChain(ctx context.Context, dst []toolplane.AuditEvent, org string, from, to int64, limit int) ([]toolplane.AuditEvent, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit chain: %w", err)
	}
	if to <= 0 {
		to = maxSeq
	}
	out, err := s.auditChain(ctx, dst, separatedChain, sqlstore.UnpackSeparated, org, from, to, limit)
	if errors.Is(err, sqlstore.ErrSeparator) {
		// A text holding a NUL byte: the page is read again in the form
		// that tells every column apart whatever it holds.
		out, err = s.auditChain(ctx, dst, packedChain, sqlstore.UnpackAudit, org, from, to, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("audit chain: %w", err)
	}
	return out, nil
}

// auditChain appends to dst AuditChain's rows read by query, each one
// packed value that unpack reads.
func (s *Store) auditChain(ctx context.Context, dst []toolplane.AuditEvent, query string, unpack func(string, func(int64) time.Time) (toolplane.AuditEvent, error), org string, from, to int64, limit int) ([]toolplane.AuditEvent, error) {
	rows, err := s.query(ctx, query, org, from, to, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := slices.Grow(dst, limit)
	for rows.Next() {
		var packed string
		if err := rows.Scan(&packed); err != nil {
			return nil, err
		}
		e, err := unpack(packed, fromMicros)
		if err != nil {
			return nil, err
		}
		// The policy input is stored packed (see setAuditArgs).
		e.PolicyInput = storedPolicyInput(e.PolicyInput)
		out = append(out, e)
	}
	return out, rows.Err()
}

// The chain's reads: each event as one text value, the driver's work
// being per column and a chain read to be verified, hundreds of thousands
// of rows a second. separatedChain packs a row as
// sqlstore.AuditSeparated does (text columns joined by NUL bytes, no
// length rendered but the byte strings'), half the work for SQLite of
// packedChain's sqlstore.AuditPacked (every column's length, rendered in
// decimal), which is read instead when a text holds a NUL byte. A length
// is in bytes; a NULL BLOB is packed as empty. A hex column stored as
// bytes is read as its text (sqlstore.HexRead).
const chainWhere = ` FROM audit_events
	WHERE organization_id = ? AND seq >= ? AND seq <= ? AND seq > 0 ORDER BY seq LIMIT ?`

var (
	separatedChain = `SELECT ` + sqlstore.AuditSeparated(func(col string) string { return "length(" + col + ")" },
		func(cols []string) string {
			read := make([]string, len(cols))
			for i, c := range cols {
				read[i] = sqlstore.HexRead(c, c)
			}
			return "concat_ws(char(0), " + strings.Join(read, ", ") + ")"
		}) + chainWhere
	packedChain = `SELECT ` + sqlstore.AuditPacked(func(col string, kind sqlstore.PackKind) (string, string) {
		switch kind {
		case sqlstore.PackText:
			v := sqlstore.HexRead(col, col)
			return "octet_length(" + v + ")", v
		default:
			return "length(" + col + ")", col
		}
	}) + chainWhere
)

// maxSeq stands for "no upper bound" in a range of sequence numbers.
const maxSeq = int64(1<<63 - 1)

// AuditHead answers where the organization's chain stands and the lowest
// Seq of its stored chained events (0: none).
func (s *Store) AuditHead(ctx context.Context, org string) (toolplane.AuditHead, int64, error) {
	h, _, err := readHead(ctx, func(ctx context.Context, q string, args ...any) (*sql.Row, error) {
		return s.db.QueryRowContext(ctx, q, args...), nil
	}, org)
	if err != nil {
		return h, 0, err
	}
	var first sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(seq) FROM audit_events WHERE organization_id = ? AND seq > 0`, org).Scan(&first); err != nil {
		return h, 0, fmt.Errorf("audit head: %w", err)
	}
	return h, first.Int64, nil
}

const insertCheckpoint = `INSERT INTO audit_checkpoints (organization_id, seq, hash, created_at, key_id, signature)
	VALUES (?, ?, ?, ?, ?, ?)`

// AppendAuditCheckpoint stores cp, or answers an error wrapping
// toolplane.ErrExists when the organization has one at its Seq.
func (s *Store) AppendAuditCheckpoint(ctx context.Context, cp *toolplane.AuditCheckpoint) error {
	_, err := s.exec(ctx, insertCheckpoint, checkpointArgs(cp)...)
	return checkpointErr(cp, err)
}

func checkpointArgs(cp *toolplane.AuditCheckpoint) []any {
	return []any{cp.OrganizationID, cp.Seq, chainBytes(cp.Hash), micros(cp.CreatedAt), cp.KeyID, chainBytes(cp.Signature)}
}

func checkpointErr(cp *toolplane.AuditCheckpoint, err error) error {
	if isDuplicate(err) {
		return fmt.Errorf("audit checkpoint %s@%d: %w", cp.OrganizationID, cp.Seq, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("audit checkpoint %s@%d: %w", cp.OrganizationID, cp.Seq, err)
	}
	return nil
}

// AuditCheckpoints answers the organization's checkpoints with from <=
// Seq <= to (to 0: no bound), in Seq order.
func (s *Store) AuditCheckpoints(ctx context.Context, org string, from, to int64) ([]toolplane.AuditCheckpoint, error) {
	if to <= 0 {
		to = maxSeq
	}
	rows, err := s.query(ctx, `SELECT organization_id, seq, hash, created_at, key_id, signature FROM audit_checkpoints
		WHERE organization_id = ? AND seq >= ? AND seq <= ? ORDER BY seq`, org, from, to)
	if err != nil {
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	out, err := collect(rows, scanCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("audit checkpoints: %w", err)
	}
	return out, nil
}

func scanCheckpoint(r scanner) (toolplane.AuditCheckpoint, error) {
	var (
		cp      toolplane.AuditCheckpoint
		created int64
	)
	err := r.Scan(&cp.OrganizationID, &cp.Seq, &cp.Hash, &created, &cp.KeyID, &cp.Signature)
	cp.CreatedAt = fromMicros(created)
	return cp, err
}

// AuditOrganizations answers organizations whose chain head is past their
// newest checkpoint, in ID order after the cursor after, at most limit.
// It crosses organizations on purpose: it is the checkpoint job's, never
// reachable from a request.
func (s *Store) AuditOrganizations(ctx context.Context, after string, limit int) ([]string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit organizations: %w", err)
	}
	rows, err := s.query(ctx, `SELECT o.organization_id FROM audit_organizations o
		WHERE o.organization_id > ? AND COALESCE(
			(SELECT MAX(e.seq) FROM audit_events e WHERE e.organization_id = o.organization_id AND e.seq > 0), 0) > COALESCE(
			(SELECT MAX(c.seq) FROM audit_checkpoints c WHERE c.organization_id = o.organization_id), 0)
		ORDER BY o.organization_id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("audit organizations: %w", err)
	}
	out, err := collect(rows, func(r scanner) (string, error) {
		var org string
		return org, r.Scan(&org)
	})
	if err != nil {
		return nil, fmt.Errorf("audit organizations: %w", err)
	}
	return out, nil
}

// DropAudit is retention: in one write (writes take turns, so it sees
// every drop committed before it) it checks that the range still starts
// at from, stores cp (unless the same checkpoint is stored already),
// checks that the chain's hash at cp.Seq is cp.Hash, deletes the
// organization's events up to it through the one door the append-only
// triggers leave open (a row of audit_retention naming the organization
// and cp.Seq, which must be removed again before the write commits, and
// whose removal checks the whole prefix is gone), and appends ev, the
// drop's own event.
func (s *Store) DropAudit(ctx context.Context, from int64, cp *toolplane.AuditCheckpoint, ev *toolplane.AuditEvent) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n = 0
		var first *int64
		if err := tx.QueryRowContext(ctx, sqlstore.FirstChained, cp.OrganizationID).Scan(&first); err != nil {
			return err
		}
		if err := sqlstore.DroppedMeanwhile(from, first); err != nil {
			return err
		}
		var hash []byte
		err := tx.QueryRowContext(ctx, `SELECT hash FROM audit_events WHERE organization_id = ? AND seq = ?`,
			cp.OrganizationID, cp.Seq).Scan(&hash)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no event at %d: %w", cp.Seq, toolplane.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if string(hash) != string(cp.Hash) {
			return fmt.Errorf("the chain's hash at %d is not the checkpoint's: %w", cp.Seq, toolplane.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_checkpoints (organization_id, seq, hash, created_at, key_id, signature)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (organization_id, seq) DO NOTHING`, checkpointArgs(cp)...); err != nil {
			return err
		}
		// The trigger checks the stored checkpoint is the chain's: one
		// stored before with another hash refuses the door.
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_retention (organization_id, through) VALUES (?, ?)`, cp.OrganizationID, cp.Seq); err != nil {
			return fmt.Errorf("the checkpoint at %d is not the chain's: %w (%v)", cp.Seq, toolplane.ErrConflict, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM audit_events WHERE organization_id = ? AND seq <= ?`, cp.OrganizationID, cp.Seq)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM audit_retention WHERE organization_id = ?`, cp.OrganizationID); err != nil {
			return err
		}
		if ev == nil {
			return nil
		}
		c := s.newChainer(ctx, tx)
		if err := c.append(ev, nil); err != nil {
			return auditErr(ev, err)
		}
		return c.save()
	})
	if err != nil {
		return 0, fmt.Errorf("drop audit %s through %d: %w", cp.OrganizationID, cp.Seq, err)
	}
	return int(n), nil
}

// AuditExpired answers the prefix of the organization's stored chain whose
// events were all created before before.
func (s *Store) AuditExpired(ctx context.Context, org string, before time.Time) (int64, int64, error) {
	var first, newer, last sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT MIN(seq) FROM audit_events WHERE organization_id = ?1 AND seq > 0),
		(SELECT MIN(seq) FROM audit_events WHERE organization_id = ?1 AND seq > 0 AND created_at >= ?2),
		(SELECT MAX(seq) FROM audit_events WHERE organization_id = ?1 AND seq > 0)`, org, micros(before)).Scan(&first, &newer, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("audit expired of %s: %w", org, err)
	}
	if !first.Valid {
		return 0, 0, nil
	}
	through := last.Int64
	if newer.Valid {
		through = newer.Int64 - 1
	}
	if through < first.Int64 {
		return first.Int64, 0, nil
	}
	return first.Int64, through, nil
}

// AuditRetentionOrganizations answers organizations storing a chained
// event created before before, in ID order after the cursor after, at most
// limit. It crosses organizations on purpose: it is the retention job's,
// never reachable from a request.
func (s *Store) AuditRetentionOrganizations(ctx context.Context, before time.Time, after string, limit int) ([]string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("audit retention organizations: %w", err)
	}
	rows, err := s.query(ctx, `SELECT o.organization_id FROM audit_organizations o
		WHERE o.organization_id > ? AND EXISTS (SELECT 1 FROM audit_events e
			WHERE e.organization_id = o.organization_id AND e.seq > 0 AND e.created_at < ?)
		ORDER BY o.organization_id LIMIT ?`, after, micros(before), limit)
	if err != nil {
		return nil, fmt.Errorf("audit retention organizations: %w", err)
	}
	out, err := collect(rows, func(r scanner) (string, error) {
		var org string
		return org, r.Scan(&org)
	})
	if err != nil {
		return nil, fmt.Errorf("audit retention organizations: %w", err)
	}
	return out, nil
}

var _ toolplane.AuditChainStore = (*Store)(nil)
