// Package sqlstore is what the SQLite and PostgreSQL stores share: the
// columns of the tables both read, the statements of their lists (a page
// after a cursor, filtered by the conditions a caller set), the guarded
// writes stored with their record, and the builder they are written with.
//
// A Dialect carries what really differs between the two databases where
// these shapes are concerned: how a placeholder is written (? or $n), how a
// list is bound (one placeholder per value, or one array), which strings a
// text parameter may hold, and how bytes are bound. The statements are
// written once, with ? placeholders, and numbered for the dialect.
//
// The package only writes text and collects arguments; it never runs a
// statement, so each store keeps its own driver (database/sql, pgx), its
// own statement cache, its own scanning of rows, and what is written out
// because the databases differ: SQLite's transactions where PostgreSQL
// writes one statement, upserts, locks and the hot writes of the journal
// and the audit trail.
package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/cursor"
)

// A Dialect is how one database writes what the shapes need. The zero
// Dialect is SQLite's.
type Dialect struct {
	// numbered: placeholders are $1, $2, … in order; otherwise each is ?.
	numbered bool
	// arrays: a list of values is bound as one array (= ANY($n));
	// otherwise each value takes a placeholder (IN (?, ?)).
	arrays bool
	// strictText: a text parameter must be UTF-8 without NUL, which is
	// all a TEXT column of the database holds; otherwise any string binds.
	strictText bool
	// byteSlices: a bytes column (BYTEA) takes a non-nil []byte; otherwise
	// (BLOB) a string binds as it is.
	byteSlices bool
	// position is the function answering where one string is found in
	// another (1-based, 0 when absent): instr in SQLite, strpos in
	// PostgreSQL.
	position string
	// hexAudit: the audit trail's hex columns, and a claim's derived key
	// and request hash, are stored as the bytes their digits spell, and
	// read back as text (see PackHex, PackClaimKey).
	hexAudit bool
}

// SQLite and Postgres are the dialects of the two stores.
var (
	// SQLite binds ? placeholders, one per value, and any string as text.
	SQLite = Dialect{position: "instr", hexAudit: true}
	// Postgres binds $n placeholders and a list as one array; its text is
	// UTF-8 without NUL.
	Postgres = Dialect{numbered: true, arrays: true, strictText: true, byteSlices: true, position: "strpos"}
)

// Bytes answers s as d binds it to a bytes column (a claim's key): a
// string holds any bytes, so the conversion loses none, and for "" it is
// never nil, which a driver would send as NULL.
func (d Dialect) Bytes(s string) any {
	if !d.byteSlices {
		return s
	}
	return append([]byte{}, s...)
}

// Text reports whether s can be bound as text in d: whether a TEXT column
// could hold it. A value that cannot matches no stored row, and a database
// sent it would answer an error rather than no rows.
func (d Dialect) Text(s string) bool {
	return !d.strictText || (strings.IndexByte(s, 0) < 0 && utf8.ValidString(s))
}

// Texts answers the values of vs that d can bind as text (see Text): vs
// itself when all can, else a copy without the others.
func (d Dialect) Texts(vs []string) []string {
	for i, v := range vs {
		if d.Text(v) {
			continue
		}
		out := append([]string(nil), vs[:i]...)
		for _, v := range vs[i+1:] {
			if d.Text(v) {
				out = append(out, v)
			}
		}
		return out
	}
	return vs
}

// Placeholders answers n placeholders for arguments from (counted from 1):
// "$5, $6, $7" in a numbered dialect, "?, ?, ?" otherwise. It is for a
// statement written once, such as an insert of every column.
func (d Dialect) Placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		d.placeholder(&b, from+i)
	}
	return b.String()
}

func (d Dialect) placeholder(b *strings.Builder, n int) {
	if !d.numbered {
		b.WriteByte('?')
		return
	}
	var digits [20]byte
	b.WriteByte('$')
	b.Write(strconv.AppendInt(digits[:0], int64(n), 10))
}

// A Query is a statement being written: its text and its arguments, in
// order. The zero Query is empty and writes SQLite's placeholders; a
// Query is used once, by one goroutine.
type Query struct {
	d    Dialect
	text strings.Builder
	args []any
	// unbindable is set when an argument is a string d cannot bind as
	// text (see Unbindable).
	unbindable bool
	// empty is set by a list no stored row can match (see Empty).
	empty bool
}

// New answers a query of d starting with text, whose ? placeholders take
// args in order.
func New(d Dialect, text string, args ...any) *Query {
	q := new(Query)
	q.Start(d, text, args...)
	return q
}

// Start makes q a new query of d starting with text, whose ? placeholders
// take args in order, as New does, in a Query the caller holds: the Query
// itself then need not be allocated (its text and arguments still are).
func (q *Query) Start(d Dialect, text string, args ...any) {
	*q = Query{d: d, args: make([]any, 0, len(args)+8)}
	q.Add(text, args...)
}

// Add appends text, whose ? placeholders take args in order. ? is a
// placeholder wherever it stands in text, so text must not hold one in a
// literal or an operator. Add panics when text's placeholders and args
// differ in number: the statement is the store's own, never the caller's.
func (q *Query) Add(text string, args ...any) {
	if strings.Count(text, "?") != len(args) {
		panic(fmt.Sprintf("sqlstore: %d arguments for the placeholders of %q", len(args), text))
	}
	if !q.d.numbered {
		q.text.WriteString(text)
	} else {
		n := len(q.args)
		for {
			i := strings.IndexByte(text, '?')
			if i < 0 {
				break
			}
			n++
			q.text.WriteString(text[:i])
			q.d.placeholder(&q.text, n)
			text = text[i+1:]
		}
		q.text.WriteString(text)
	}
	for _, a := range args {
		q.arg(a)
	}
}

// arg appends one argument, noting a string d cannot bind as text.
func (q *Query) arg(a any) {
	if s, ok := a.(string); ok && !q.d.Text(s) {
		q.unbindable = true
	}
	q.args = append(q.args, a)
}

// Eq appends "AND column = ?" taking value, when value is set: a filter
// left empty is no condition, so the query can use the index that fits the
// conditions that are.
func (q *Query) Eq(column, value string) {
	if value == "" {
		return
	}
	// Written piece by piece: a list runs on a call's path, and joining
	// the text first would cost an allocation a filter.
	q.text.WriteString(` AND `)
	q.text.WriteString(column)
	q.text.WriteString(` = `)
	q.bind(0, value)
}

// Contains appends "AND column holds value" (a substring, matched
// bytewise, case and all), when value is set. Unlike LIKE it has no
// wildcard to escape, and SQLite's LIKE would fold ASCII case.
func (q *Query) Contains(column, value string) {
	if value == "" {
		return
	}
	pos := q.d.position
	if pos == "" {
		pos = "instr"
	}
	q.Add(` AND `+pos+`(`+column+`, ?) > 0`, value)
}

// In appends a condition that column is one of values, when there are
// any: "AND column IN (?, ?)", or in a dialect that binds arrays "AND
// column = ANY($n)", one argument however many values.
func (q *Query) In(column string, values []string) {
	if len(values) == 0 {
		return
	}
	if q.d.arrays {
		for _, v := range values {
			if !q.d.Text(v) {
				q.unbindable = true
			}
		}
		q.Add(` AND `+column+` = ANY(?)`, values)
		return
	}
	q.text.WriteString(` AND ` + column + ` IN (`)
	for i, v := range values {
		q.bind(i, v)
	}
	q.text.WriteByte(')')
}

// bind appends v and its placeholder, the i-th of a parenthesized list.
func (q *Query) bind(i int, v any) {
	if i > 0 {
		q.text.WriteString(", ")
	}
	q.arg(v)
	q.d.placeholder(&q.text, len(q.args))
}

// After appends the keyset condition of a page after a cursor: "AND
// (created_at, id) > (?, ?)" for keys "created_at, id" and op ">", the
// values in the keys' order. op is ">" for a list in ascending order, "<"
// for one in descending order.
func (q *Query) After(keys, op string, values ...any) {
	q.text.WriteString(` AND (`)
	q.tuple(keys, op, values)
}

// WhereAfter is After for a query with no condition before it: it begins
// with WHERE.
func (q *Query) WhereAfter(keys, op string, values ...any) {
	q.text.WriteString(` WHERE (`)
	q.tuple(keys, op, values)
}

func (q *Query) tuple(keys, op string, values []any) {
	q.text.WriteString(keys + `) ` + op + ` (`)
	for i, v := range values {
		q.bind(i, v)
	}
	q.text.WriteByte(')')
}

// AfterCursor appends the keyset condition of a page after the cursor
// after, of a list ordered by created_at and then an ID (keys "created_at,
// id"), with op as After takes it; nothing when after is "" (the first
// page). A cursor that is not one of list, or whose ID the dialect cannot
// bind, is an error wrapping cursor.ErrMalformed.
func (q *Query) AfterCursor(after string, list byte, op string) error {
	if after == "" {
		return nil
	}
	createdAt, parts, err := q.d.Cursor(after, list, 1)
	if err != nil {
		return err
	}
	q.After("created_at, id", op, createdAt, parts[0])
	return nil
}

// Page appends "ORDER BY order LIMIT ?" taking limit+1: one row more than
// the page, whose coming says that a page follows (see Page).
func (q *Query) Page(order string, limit int) {
	q.text.WriteString(` ORDER BY `)
	q.text.WriteString(order)
	q.text.WriteString(` LIMIT `)
	q.bind(0, limit+1)
}

// String answers the statement's text.
func (q *Query) String() string { return q.text.String() }

// Args answers the statement's arguments, in the order of its placeholders.
func (q *Query) Args() []any { return q.args }

// Unbindable reports whether an argument is a string the dialect cannot
// bind as text (see Dialect.Text). No stored row holds such a value, so a
// list filtered by one is empty; sent, it would answer a database error.
func (q *Query) Unbindable() bool { return q.unbindable }

// Empty reports whether the query is of a list no stored row can match
// (see the lists): its page is empty, and nothing is to run.
func (q *Query) Empty() bool { return q.empty }

// MaxLimit is the largest page a list answers.
const MaxLimit = 1000

// ErrLimit is a page size out of 1..MaxLimit: an invalid request, wrapped
// with the call it came to.
var ErrLimit = toolplane.Refine(toolplane.ErrInvalid, "limit must be between 1 and 1000")

// CheckLimit refuses a page size out of 1..MaxLimit with an error wrapping
// ErrLimit.
func CheckLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return fmt.Errorf("%w, not %d", ErrLimit, limit)
	}
	return nil
}

// Cursor decodes after, a cursor of list with n parts (see cursor.Decode),
// each bound for a TEXT column (see CursorText).
func (d Dialect) Cursor(after string, list byte, n int) (int64, []string, error) {
	at, parts, err := cursor.Decode(after, list, n)
	if err == nil {
		err = d.CursorText(parts...)
	}
	if err != nil {
		return 0, nil, err
	}
	return at, parts, nil
}

// CursorText refuses cursor parts bound for TEXT columns that d cannot bind
// as text: no row could have made such a cursor, so it is malformed (an
// error wrapping cursor.ErrMalformed), where sending it would answer a
// database error. A part bound for a bytes column (a claim's key) takes
// any byte and is not checked.
func (d Dialect) CursorText(parts ...string) error {
	for _, p := range parts {
		if !d.Text(p) {
			return fmt.Errorf("%w: not text", cursor.ErrMalformed)
		}
	}
	return nil
}

// Page answers the page of rows, which a query asked with one row more
// than limit (Query.Page): the first limit rows and, when the extra row
// came, the cursor next answers for the page's last row; "" when no row
// follows.
func Page[T any](rows []T, limit int, next func(last *T) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, next(&rows[limit-1])
}
