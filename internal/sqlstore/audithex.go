package sqlstore

import (
	"strconv"
	"strings"
)

// Five columns of an audit event hold hex digits: the arguments' hash (64
// digits), the output's ("sha256:" and 64), the trace and span ids (32 and
// 16), and a derived idempotency key, which ends with the 64 digits of a
// hash ("3:run,7:agent-1,…,64:6e0f…"). As text they were a fifth of a
// call's audit row on SQLite (issue 35). SQLite stores such a value as a
// BLOB: the bytes the digits spell, half their size, after the text before
// them when the column has no fixed prefix (the key). It reads one back as
// the text it was (HexRead): the fixed prefix, or the text the bytes
// start with, and the bytes in lowercase hex. A value not of its column's
// form (an uppercase digit, an empty hash, a key a caller chose) is
// stored as the text it is, so every value reads back byte for byte.
// PostgreSQL stores the text.
//
// The chain's hash covers the event, not its stored form: the form is the
// store's, and verification reads the text back.

// hexColumn is a column stored as the bytes of its hex digits.
type hexColumn struct {
	col string
	// prefix is the text every packed value starts with, not stored;
	// anyText: any text instead, stored before the digits' bytes.
	prefix  string
	anyText bool
	digits  int
}

// hexColumns are the audit_events columns so stored on SQLite, with the
// index of each among AuditColumns (see TestHexColumnsAreAuditColumns).
var hexColumns = [...]hexColumn{
	{col: "arguments_hash", digits: 64},
	{col: "output_hash", prefix: "sha256:", digits: 64},
	{col: "trace_id", digits: 32},
	{col: "span_id", digits: 16},
	{col: "key", anyText: true, digits: 64},
}

// The indexes among AuditColumns of the columns of hexColumns, in order.
const (
	HexArgumentsHash = 10
	HexOutputHash    = 38
	HexTraceID       = 32
	HexSpanID        = 33
	HexKey           = 16
)

// hexAt answers the column of hexColumns at index i of AuditColumns.
func hexAt(i int) *hexColumn {
	switch i {
	case HexArgumentsHash:
		return &hexColumns[0]
	case HexOutputHash:
		return &hexColumns[1]
	case HexTraceID:
		return &hexColumns[2]
	case HexSpanID:
		return &hexColumns[3]
	case HexKey:
		return &hexColumns[4]
	}
	return nil
}

// PackHex answers the form SQLite stores v in, appended to dst, when v is
// a value of AuditColumns' column i (one of the Hex… indexes) that is
// stored as bytes: the column's prefix (or, for the key, any text) and its
// count of lowercase hex digits. ok is false for any other value, stored
// as its text.
func PackHex(dst []byte, i int, v string) (_ []byte, ok bool) {
	c := hexAt(i)
	if c == nil || len(v) < len(c.prefix)+c.digits || (!c.anyText && len(v) != len(c.prefix)+c.digits) {
		return dst, false
	}
	text, h := v[:len(v)-c.digits], v[len(v)-c.digits:]
	if !c.anyText && text != c.prefix {
		return dst, false
	}
	if !lowerHex(h) {
		return dst, false
	}
	if c.anyText {
		dst = append(dst, text...)
	}
	return appendUnhex(dst, h), true
}

// hexRead answers the SQL expression, in SQLite, of column col of a hex
// column as text: a BLOB as the column's prefix and its bytes in lowercase
// hex, a text as it is.
func hexRead(c *hexColumn, col string) string {
	if c.anyText {
		// The text is the bytes before the digits' (a BLOB's length and
		// substr count bytes).
		n := strconv.Itoa(c.digits / 2)
		return "iif(typeof(" + col + ") = 'blob', CAST(substr(" + col + ", 1, length(" + col + ") - " + n + ") AS TEXT) || lower(hex(substr(" +
			col + ", -" + n + "))), " + col + ")"
	}
	prefix := ""
	if c.prefix != "" {
		prefix = "'" + c.prefix + "' || "
	}
	return "iif(typeof(" + col + ") = 'blob', " + prefix + "lower(hex(" + col + ")), " + col + ")"
}

// HexRead answers the SQL expression, in SQLite, reading the audit_events
// column named col as its text: expr (the column, qualified by its table
// if need be) itself unless col is a hex column.
func HexRead(col, expr string) string {
	for i := range hexColumns {
		if c := &hexColumns[i]; c.col == col {
			return hexRead(c, expr)
		}
	}
	return expr
}

// AuditSelect answers AuditColumns as the store of d reads them: on
// SQLite, each hex column read back as its text (HexRead). Every column
// is prefixed by table and a dot unless table is "".
func (d Dialect) AuditSelect(table string) string {
	if table == "" && !d.hexAudit {
		return AuditColumns
	}
	if table == "" {
		return sqliteAuditSelect
	}
	return auditSelect(d.hexAudit, table)
}

// sqliteAuditSelect is SQLite's AuditSelect(""), written once.
var sqliteAuditSelect = auditSelect(true, "")

func auditSelect(hex bool, table string) string {
	var b strings.Builder
	for i, c := range auditPack {
		if i > 0 {
			b.WriteString(", ")
		}
		col := c.col
		if table != "" {
			col = table + "." + col
		}
		if hex {
			col = HexRead(c.col, col)
		}
		b.WriteString(col)
	}
	return b.String()
}
