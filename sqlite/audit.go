package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanEvent(r scanner) (toolplane.AuditEvent, error) {
	var (
		e       toolplane.AuditEvent
		created int64
		input   []byte
		args    []byte
		pii     string
		classes string
	)
	err := r.Scan(&e.OrganizationID, &e.ID, &e.RunID, &e.AgentID, &e.PrincipalID, &e.UserID, &e.Tool,
		&e.ToolVersion, &e.Source, &e.Outcome, &e.ArgumentsHash, &e.ApprovalID, &e.AuthorizedBy,
		&e.Replayed, &e.LatencyMicros, &created, &e.Key, &e.Reason, &e.ConnectionID,
		&e.PolicyDecision, &e.PolicyBundle, &e.PolicyRule, &e.PolicyDegraded, &input, &e.ParentID,
		&e.Kind, &e.Subject, &e.TenantID, &e.StepPath, &e.KeyID, &e.Effect, &e.Destructive, &e.TraceID, &e.SpanID,
		&e.ApproverID, &args, &pii, &classes, &e.OutputHash, &e.CostCents, &e.Attempts,
		&e.Seq, &e.PrevHash, &e.Hash)
	if err != nil {
		return e, err
	}
	if len(input) > 0 {
		e.PolicyInput = storedPolicyInput(input)
	}
	if len(args) > 0 {
		e.Arguments = args
	}
	if e.PIIFields, err = sqlstore.SplitStrings(pii); err != nil {
		return e, err
	}
	if e.Classifications, err = sqlstore.SplitStrings(classes); err != nil {
		return e, err
	}
	e.CreatedAt = fromMicros(created)
	return e, nil
}

// AppendAudit stores e, or answers an error wrapping toolplane.ErrExists when
// its organization already has an event with that ID. It sets e's place in
// its organization's chain (Seq, PrevHash, Hash), assigned in the write
// that stores it.
func (s *Store) AppendAudit(ctx context.Context, e *toolplane.AuditEvent) error {
	inTx := func(ctx context.Context, tx *sql.Tx) error {
		c := s.newChainer(ctx, tx)
		if err := c.append(e, nil); err != nil {
			return err
		}
		return c.save()
	}
	err := s.writeSolo(ctx, inTx, func(ctx context.Context) error {
		return s.appendAuditSolo(ctx, e, inTx)
	})
	return auditErr(e, err)
}

// appendAuditSolo is AppendAudit's write when it runs alone on an idle
// store (see writeSolo), under the store's write lock: the insert that
// chains e where this store left its organization's chain
// (chainer.appendHinted), which commits on its own, without the
// transaction and the connection taken for it that cost a lone event
// more than its insert. When there is no such hint, or the chain moved
// on (nothing was stored then), e is appended by inTx, in a transaction
// of its own.
func (s *Store) appendAuditSolo(ctx context.Context, e *toolplane.AuditEvent, inTx func(context.Context, *sql.Tx) error) error {
	args := s.auditArgs.take()
	if args != nil {
		stored, err := s.appendAuditHinted(ctx, e, args)
		if stored || err != nil {
			return err
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := inTx(ctx, tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// appendAuditHinted is chainer.appendHinted outside any transaction,
// with args taken from s.auditArgs and given back.
func (s *Store) appendAuditHinted(ctx context.Context, e *toolplane.AuditEvent, args []any) (bool, error) {
	defer s.auditArgs.give()
	auditchain.Normalize(e)
	c := chainer{s: s, ctx: ctx}
	return c.appendHinted(e, args)
}

var insertAudit = `INSERT INTO audit_events (` + auditColumns + `)
		VALUES (` + auditValues(auditArgCount, 0) + `)`

// textArgs marks the insert's arguments that are texts, but for the
// organization (a chained insert's condition compares it, see
// insertAuditAfter): an empty one is bound as NULL (setText) and made
// ” again by the statement (coalesce). Binding a text costs modernc's
// driver a C buffer, allocated, bound, unbound after the statement and
// freed, and a read call's event leaves half its texts empty (the
// approval, the person, the reason, the parent, the kind, the tenant …);
// NULL is bound without any of that. The stored value is the same ”.
var textArgs = func() (m [auditArgCount]bool) {
	for _, i := range [...]int{1, 2, 3, 4, 5, 6, 7, 8, 9, sqlstore.HexArgumentsHash, 11, 12, sqlstore.HexKey, 17, 18, 19,
		21, 24, 25, 26, 27, 28, 29, 30, sqlstore.HexTraceID, sqlstore.HexSpanID, 34, 36, 37, sqlstore.HexOutputHash} {
		m[i] = true
	}
	return m
}()

// auditValues answers the VALUES of the insert's first n arguments for
// events of the shape mask (auditShape): a value the mask holds is
// written in the statement (auditLiteral), any other is a parameter. With
// no mask, every value is a parameter, and a text's read as ” when NULL
// (see textArgs).
func auditValues(n int, mask uint64) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		switch {
		case mask&(1<<i) != 0:
			b.WriteString(auditLiteral[i])
		case textArgs[i]:
			b.WriteString("coalesce(?, '')")
		default:
			b.WriteString("?")
		}
	}
	return b.String()
}

// auditLiteral is, for each of the insert's arguments an event often
// leaves empty or zero, that value in SQL: the statement for events of a
// shape (auditShape) holds it, and the driver binds it not at all. Every
// argument bound costs modernc's driver its conversion and the
// connection's mutex twice (bound, then unbound after the statement);
// a read call's event leaves some twenty of them empty or zero. The
// stored values are the same: ”, 0, NULL.
var auditLiteral = func() (m [auditArgCount]string) {
	for i, text := range textArgs {
		if text {
			m[i] = "''"
		}
	}
	// replayed, policy_bundle, policy_degraded, destructive, cost_cents,
	// attempts.
	for _, i := range [...]int{13, 20, 22, 31, 39, 40} {
		m[i] = "0"
	}
	m[argPolicyInput], m[argArguments] = "NULL", "NULL"
	return m
}()

// auditShape answers the shape of an event's insert arguments
// (setAuditArgs): a bit for each argument that holds its column's empty
// or zero value (auditLiteral).
func auditShape(args []any) uint64 {
	var mask uint64
	for i, lit := range auditLiteral {
		if lit != "" && emptyArg(args[i]) {
			mask |= 1 << i
		}
	}
	return mask
}

// emptyArg reports whether v, an insert argument, is NULL, an empty text
// (bound as NULL, see setText), false or zero.
func emptyArg(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case int64:
		return x == 0
	case int:
		return x == 0
	}
	return false
}

// maxAuditShapes bounds the statements made for events' shapes; past it an
// event of a new shape is stored by the statement binding every argument
// (insertAudit). Events come in a few shapes (a read, a write, an
// approval, a control-plane change), each its own.
const maxAuditShapes = 64

// auditShapes are the insert statements made for events' shapes, by key:
// the shape's mask, shifted, and 1 for the guarded insert
// (insertAuditAfter).
type auditShapes struct {
	mu sync.Mutex
	m  map[uint64]string
}

// query answers the insert statement for key, made on first use, or false
// when there are maxAuditShapes already.
func (a *auditShapes) query(key uint64) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q, ok := a.m[key]; ok {
		return q, true
	}
	if len(a.m) >= maxAuditShapes {
		return "", false
	}
	if a.m == nil {
		a.m = make(map[uint64]string)
	}
	mask := key >> 1
	q := `INSERT INTO audit_events (` + auditColumns + `)
		VALUES (` + auditValues(auditArgCount, mask) + `)`
	if key&1 != 0 {
		q = `INSERT INTO audit_events (` + auditColumns + `)
		VALUES (` + auditValues(auditArgCount-3, mask) + `,` + insertAfterCondition
	}
	a.m[key] = q
	return q, true
}

// auditArgCount is how many arguments insertAudit takes.
const auditArgCount = 44

// The positions of the insert's two documents, which are the event's own
// and may be large: auditArgs drops them after each insert.
const (
	argPolicyInput = 23
	argArguments   = 35
)

// setAuditArgs makes args insertAudit's arguments for e, in place. A
// value equal to the one args holds keeps it: rows of a batch share one
// argument slice, and the fields their events share (the organization,
// agent, tool, source, outcome) are then boxed once a batch, not once a
// row.
func setAuditArgs(args []any, e *toolplane.AuditEvent) {
	setArg(args, 0, e.OrganizationID)
	setText(args, 1, e.ID)
	setText(args, 2, e.RunID)
	setText(args, 3, e.AgentID)
	setText(args, 4, e.PrincipalID)
	setText(args, 5, e.UserID)
	setText(args, 6, e.Tool)
	setText(args, 7, e.ToolVersion)
	setText(args, 8, string(e.Source))
	setText(args, 9, e.Outcome)
	setHexArg(args, sqlstore.HexArgumentsHash, e.ArgumentsHash)
	setText(args, 11, e.ApprovalID)
	setText(args, 12, e.AuthorizedBy)
	setArg(args, 13, e.Replayed)
	setArg(args, 14, e.LatencyMicros)
	setArg(args, 15, micros(e.CreatedAt))
	setHexArg(args, sqlstore.HexKey, e.Key)
	setText(args, 17, e.Reason)
	setText(args, 18, e.ConnectionID)
	setText(args, 19, e.PolicyDecision)
	setArg(args, 20, e.PolicyBundle)
	setText(args, 21, e.PolicyRule)
	setArg(args, 22, e.PolicyDegraded)
	// The policy input is stored packed (sqlstore.PackDocument): most
	// of it repeats from call to call. The chain's hash covers the
	// document, not its stored form.
	args[argPolicyInput] = blob(sqlstore.PackDocument(e.PolicyInput))
	setText(args, 24, e.ParentID)
	setText(args, 25, string(e.Kind))
	setText(args, 26, e.Subject)
	setText(args, 27, e.TenantID)
	setText(args, 28, e.StepPath)
	setText(args, 29, e.KeyID)
	setText(args, 30, string(e.Effect))
	setArg(args, 31, e.Destructive)
	setHexArg(args, sqlstore.HexTraceID, e.TraceID)
	setHexArg(args, sqlstore.HexSpanID, e.SpanID)
	setText(args, 34, e.ApproverID)
	args[argArguments] = blob(e.Arguments)
	setText(args, 36, sqlstore.JoinStrings(e.PIIFields))
	setText(args, 37, sqlstore.JoinStrings(e.Classifications))
	setHexArg(args, sqlstore.HexOutputHash, e.OutputHash)
	setArg(args, 39, e.CostCents)
	setArg(args, 40, e.Attempts)
	args[41] = e.Seq
	args[42] = chainBytes(e.PrevHash)
	args[43] = e.Hash
}

// setHexArg sets args[i], the argument of a hex column (see
// sqlstore.PackHex), to v's bytes, or to v when it is stored as text.
// Bytes args holds already are overwritten in place: each insert binds
// (copies) its arguments before it returns, and args is one writer's at
// a time (see setAuditArgs), so an event's bytes cost no allocation once
// the slice has held some.
func setHexArg(args []any, i int, v string) {
	var buf [128]byte // a longer key's form is allocated
	b, ok := sqlstore.PackHex(buf[:0], i, v)
	if !ok {
		setText(args, i, v)
		return
	}
	if old, ok := args[i].([]byte); ok && len(old) == len(b) {
		copy(old, b)
		return
	}
	args[i] = bytes.Clone(b)
}

// chainBytes answers a chain hash as stored: an empty one (the first
// event's PrevHash) is an empty BLOB, not NULL, which only events from
// before the chain have.
func chainBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// setText sets args[i], a text argument (textArgs), to v, or to nil
// when v is empty.
func setText(args []any, i int, v string) {
	if v == "" {
		args[i] = nil
		return
	}
	setArg(args, i, v)
}

// setArg sets args[i] to v unless it already holds a T equal to v.
func setArg[T comparable](args []any, i int, v T) {
	if old, ok := args[i].(T); !ok || old != v {
		args[i] = v
	}
}

// writeAudited runs query, a conditional change of one row, with args,
// and appends e when it changed the row, in one write (see Store.write):
// a change that matches no row (a stale version) stores neither, and
// neither does an event that cannot be stored. It answers whether the row
// changed.
func (s *Store) writeAudited(ctx context.Context, query string, args []any, e *toolplane.AuditEvent) (bool, error) {
	change, err := s.prepared(ctx, query)
	if err != nil {
		return false, err
	}
	var ok bool
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, change).ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		if ok, err = affected(res); err != nil || !ok {
			return err
		}
		c := s.newChainer(ctx, tx)
		if err := c.append(e, nil); err != nil {
			return auditErr(e, err)
		}
		return c.save()
	})
	return ok && err == nil, err
}

func auditErr(e *toolplane.AuditEvent, err error) error {
	if err == nil {
		return nil
	}
	if isDuplicate(err) {
		return fmt.Errorf("append audit %s: %w", e.ID, toolplane.ErrExists)
	}
	return fmt.Errorf("append audit %s: %w", e.ID, err)
}

// AppendAuditBatch appends events in one transaction: one commit for many
// events is what lets a background writer keep up with the calls it
// records. Either every event is stored or none is.
func (s *Store) AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error {
	// One row per statement: a statement of many rows measured slower in
	// a long-lived database, writing pages while it ran (see
	// BENCHMARKS.md).
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// database/sql copies the arguments before a statement runs, so
		// one slice serves every row (see setAuditArgs).
		args := make([]any, argsRoom)
		c := s.newChainer(ctx, tx)
		c.many = true
		for _, e := range events {
			if err := c.append(e, args); err != nil {
				return auditErr(e, err)
			}
		}
		return c.save()
	})
	if err != nil {
		return fmt.Errorf("append audit batch: %w", err)
	}
	return nil
}

// ListAudit answers the events matching filter, newest first (ties by ID,
// descending), before the cursor. Paging walks toward older events, so
// events appended meanwhile (newer ones) never shift a page. The next cursor
// is "" when no event follows.
func (s *Store) ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListAudit(&q, dialect, org, filter, after, limit)
	return page(ctx, s, "list audit", &q, err, limit, scanEvent, sqlstore.AuditCursor)
}

// GetAudit answers the organization's event with that ID, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetAudit(ctx context.Context, org, id string) (*toolplane.AuditEvent, error) {
	rows, err := s.query(ctx, `SELECT `+auditSelect+` FROM audit_events WHERE organization_id = ? AND id = ?`, org, id)
	if err != nil {
		return nil, fmt.Errorf("get audit %s: %w", id, err)
	}
	out, err := collect(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("get audit %s: %w", id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("get audit %s: %w", id, toolplane.ErrNotFound)
	}
	return &out[0], nil
}

// storedPolicyInput answers the policy input document of a stored row:
// unpacked (see setAuditArgs), or, when the stored bytes are not a packed
// document that reads back (a row edited by hand), those bytes as they
// are. A damaged row is then read like any other changed row: the audit
// list still shows it and its organization's other events, and chain
// verification names it as changed at its position, which an error here
// would hide behind a failed read.
func storedPolicyInput(stored []byte) []byte {
	doc, err := sqlstore.UnpackDocument(stored)
	if err != nil {
		return stored
	}
	return doc
}
