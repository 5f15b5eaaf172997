package sqlstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// PackKind is how a column of audit_events is packed (see AuditPacked).
type PackKind uint8

// The kinds of column a packed audit row holds.
const (
	// PackText is text, packed as its bytes.
	PackText PackKind = iota
	// PackInt is an integer, packed in decimal.
	PackInt
	// PackBool is a boolean, packed as 1 or 0.
	PackBool
	// PackBytes is a byte string (a JSON document, a hash; NULL as
	// empty), packed as its bytes.
	PackBytes
)

// auditPack is AuditColumns with each column's kind, in order.
var auditPack = [...]struct {
	col  string
	kind PackKind
}{
	{"organization_id", PackText}, {"id", PackText}, {"run_id", PackText}, {"agent_id", PackText},
	{"principal_id", PackText}, {"user_id", PackText}, {"tool", PackText}, {"tool_version", PackText},
	{"source", PackText}, {"outcome", PackText}, {"arguments_hash", PackText}, {"approval_id", PackText},
	{"authorized_by", PackText}, {"replayed", PackBool}, {"latency_micros", PackInt}, {"created_at", PackInt},
	{"key", PackText}, {"reason", PackText}, {"connection_id", PackText}, {"policy_decision", PackText},
	{"policy_bundle", PackInt}, {"policy_rule", PackText}, {"policy_degraded", PackBool}, {"policy_input", PackBytes},
	{"parent_id", PackText}, {"kind", PackText}, {"subject", PackText}, {"tenant_id", PackText},
	{"step_path", PackText}, {"key_id", PackText}, {"effect", PackText}, {"destructive", PackBool},
	{"trace_id", PackText}, {"span_id", PackText}, {"approver_id", PackText}, {"arguments", PackBytes},
	{"pii_fields", PackText}, {"classifications", PackText}, {"output_hash", PackText}, {"cost_cents", PackInt},
	{"attempts", PackInt}, {"seq", PackInt}, {"prev_hash", PackBytes}, {"hash", PackBytes},
}

// AuditColumnCount is how many columns AuditColumns names.
const AuditColumnCount = len(auditPack)

// PackKindOf answers the kind of AuditColumns' column i.
func PackKindOf(i int) PackKind { return auditPack[i].kind }

// AuditPacked answers an SQL expression of one text value holding a whole
// audit_events row, every column of AuditColumns in order, each as its
// length in bytes, a colon and its value: field answers the pair of
// expressions (length, value) for a column of a kind, in the store's
// dialect, and concat joins them. A row read so is one value for the
// driver to hand over, not 44: reading a chain to verify it is mostly
// the drivers' work per column (UnpackAudit reads it back).
func AuditPacked(field func(col string, kind PackKind) (length, value string)) string {
	// concat takes at most 100 arguments on PostgreSQL: groups of 30
	// fields (90 arguments), joined by an outer concat.
	const group = 30
	var b strings.Builder
	b.WriteString("concat(")
	for i, c := range auditPack {
		switch {
		case i%group == 0 && i > 0:
			b.WriteString("), concat(")
		case i%group == 0:
			b.WriteString("concat(")
		default:
			b.WriteString(", ")
		}
		n, v := field(c.col, c.kind)
		b.WriteString(n)
		b.WriteString(", ':', ")
		b.WriteString(v)
	}
	b.WriteString("))")
	return b.String()
}

// errPacked is a row that is not in the form it was read as.
var errPacked = errors.New("malformed packed audit row")

// ErrSeparator is a row in AuditSeparated's form whose text holds a NUL
// byte, so its columns cannot be told apart: read it in AuditPacked's
// form instead.
var ErrSeparator = errors.New("packed audit row: a text column holds a NUL byte")

// The forms a row is read from (see columns).
const (
	formPacked    = iota // AuditPacked's
	formSeparated        // AuditSeparated's
	formBinary           // UnpackBinary's
)

// columns reads one row's columns in AuditColumns' order, from a row in
// one of three forms. (One type, not an interface with one a form: a
// reader passed through an interface escapes, an allocation a row.)
type columns struct {
	form int
	// s is what is left to read: of the packed row (formPacked), of its
	// text columns (formSeparated), or of its text and byte string
	// columns' bytes, joined (formBinary).
	s string
	// blobs are formSeparated's byte strings, in order, nblobs of them
	// read; vals formBinary's columns.
	blobs  [sepBlobs]string
	nblobs int
	vals   [][]byte
	col    int  // the next column's index in auditPack
	ended  bool // formSeparated: the last text column was read
	size   int  // the row's length, for an error's position
	err    error
}

// text answers the next column: a text, or a byte string's bytes.
func (r *columns) text() string {
	if r.err != nil {
		return ""
	}
	if r.col >= len(auditPack) {
		r.err = errPacked
		return ""
	}
	kind := auditPack[r.col].kind
	r.col++
	switch r.form {
	case formSeparated:
		if kind == PackBytes {
			if r.nblobs == len(r.blobs) {
				r.err = errPacked
				return ""
			}
			r.nblobs++
			return r.blobs[r.nblobs-1]
		}
		if r.ended {
			r.fail()
			return ""
		}
		i := strings.IndexByte(r.s, 0)
		if i < 0 {
			v := r.s
			r.s, r.ended = "", true
			return v
		}
		v := r.s[:i]
		r.s = r.s[i+1:]
		return v
	case formBinary:
		n := len(r.vals[r.col-1])
		if kind == PackInt || kind == PackBool || n > len(r.s) {
			r.err = errPacked
			return ""
		}
		v := r.s[:n]
		r.s = r.s[n:]
		return v
	}
	v, rest, ok := lengthPrefixed(r.s)
	if !ok {
		r.err = errPacked
		return ""
	}
	r.s = rest
	return v
}

// lengthPrefixed answers the field s starts with (its length in decimal,
// a colon and its bytes) and what follows it.
func lengthPrefixed(s string) (v, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 0 {
		return "", s, false
	}
	n := 0
	if i > 0 {
		var err error
		if n, err = strconv.Atoi(s[:i]); err != nil || n < 0 || n > len(s)-i-1 {
			return "", s, false
		}
	}
	return s[i+1 : i+1+n], s[i+1+n:], true
}

// binary answers the next column's value in formBinary.
func (r *columns) binary() []byte {
	if r.err != nil {
		return nil
	}
	if r.col >= len(r.vals) {
		r.err = errPacked
		return nil
	}
	r.col++
	return r.vals[r.col-1]
}

// int answers the next column as an integer.
func (r *columns) int() int64 {
	if r.form == formBinary {
		switch v := r.binary(); len(v) {
		case 8:
			return int64(binary.BigEndian.Uint64(v))
		case 4:
			return int64(int32(binary.BigEndian.Uint32(v)))
		default:
			r.fail()
			return 0
		}
	}
	v := r.text()
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		r.err = errPacked
	}
	return n
}

// bool answers the next column as a boolean.
func (r *columns) bool() bool {
	if r.form == formBinary {
		v := r.binary()
		if len(v) != 1 {
			r.fail()
			return false
		}
		return v[0] != 0
	}
	switch r.text() {
	case "1", "t", "true":
		return true
	case "0", "f", "false":
		return false
	}
	r.fail()
	return false
}

func (r *columns) fail() {
	if r.err == nil {
		r.err = errPacked
	}
}

// end answers the first column that could not be read, or that columns
// are left unread.
func (r *columns) end() error {
	if r.err == nil && (r.col != len(auditPack) || r.s != "" || (r.form == formSeparated && (!r.ended || r.nblobs != len(r.blobs)))) {
		r.err = errPacked
	}
	if r.err != nil {
		return fmt.Errorf("%w at byte %d", r.err, r.size-len(r.s))
	}
	return nil
}

// read answers the event r reads, as the stores' scans of AuditColumns
// answer it. Its strings are pieces of r's, and its byte strings share
// one allocation.
func (r *columns) read(at func(micros int64) time.Time) (toolplane.AuditEvent, error) {
	var e toolplane.AuditEvent
	text := r.text
	e.OrganizationID, e.ID, e.RunID, e.AgentID = text(), text(), text(), text()
	e.PrincipalID, e.UserID, e.Tool, e.ToolVersion = text(), text(), text(), text()
	e.Source, e.Outcome, e.ArgumentsHash = toolplane.Source(text()), text(), text()
	e.ApprovalID, e.AuthorizedBy, e.Replayed = text(), text(), r.bool()
	e.LatencyMicros = r.int()
	created := r.int()
	e.Key, e.Reason, e.ConnectionID, e.PolicyDecision = text(), text(), text(), text()
	e.PolicyBundle, e.PolicyRule, e.PolicyDegraded = r.int(), text(), r.bool()
	input := text()
	e.ParentID, e.Kind, e.Subject, e.TenantID = text(), toolplane.AuditKind(text()), text(), text()
	e.StepPath, e.KeyID, e.Effect, e.Destructive = text(), text(), toolplane.Effect(text()), r.bool()
	e.TraceID, e.SpanID, e.ApproverID = text(), text(), text()
	args := text()
	pii, classes, outputHash := text(), text(), text()
	e.OutputHash = outputHash
	e.CostCents = r.int()
	e.Attempts = int(r.int())
	e.Seq = r.int()
	prev, hash := text(), text()
	if err := r.end(); err != nil {
		return toolplane.AuditEvent{}, err
	}
	// The byte strings in one allocation, each capped at its end.
	buf := make([]byte, 0, len(input)+len(args)+len(prev)+len(hash))
	take := func(v string) []byte {
		if v == "" {
			return nil
		}
		at := len(buf)
		buf = append(buf, v...)
		return buf[at:len(buf):len(buf)]
	}
	e.PolicyInput, e.Arguments, e.PrevHash, e.Hash = take(input), take(args), take(prev), take(hash)
	var err error
	if e.PIIFields, err = SplitStrings(pii); err != nil {
		return e, err
	}
	if e.Classifications, err = SplitStrings(classes); err != nil {
		return e, err
	}
	e.CreatedAt = at(created)
	return e, nil
}

// UnpackAudit answers the event a packed row (AuditPacked) holds, as the
// stores' scans of AuditColumns answer it. Its strings share the packed
// row's memory, and its byte strings one allocation: a row costs the
// driver's value and about two allocations more. at is the store's
// reading of a time in microseconds.
func UnpackAudit(packed string, at func(micros int64) time.Time) (toolplane.AuditEvent, error) {
	r := columns{form: formPacked, s: packed, size: len(packed)}
	return r.read(at)
}

// AuditSeparated answers an SQL expression of one text value holding a
// whole audit_events row, as AuditPacked does but cheaper for the
// database to build: the byte strings first, in AuditColumns' order, each
// as its length in bytes (length answers its expression), a colon and its
// bytes; then every other column, in AuditColumns' order, as text, a NUL
// byte between each two (join answers the expression joining cols so).
// Rendering the lengths as text is about half of what AuditPacked's form
// costs SQLite, and a text column has none here. A text holding a NUL
// byte itself would shift the columns after it: UnpackSeparated tells it
// by the count of NUL bytes, and the row is read in AuditPacked's form
// instead.
func AuditSeparated(length func(col string) string, join func(cols []string) string) string {
	var b strings.Builder
	var text []string
	b.WriteString("concat(")
	for _, c := range auditPack {
		if c.kind != PackBytes {
			text = append(text, c.col)
			continue
		}
		b.WriteString(length(c.col))
		b.WriteString(", ':', ")
		b.WriteString(c.col)
		b.WriteString(", ")
	}
	b.WriteString(join(text))
	b.WriteString(")")
	return b.String()
}

// sepBlobs and sepText are how many byte strings and other columns a row
// in AuditSeparated's form holds (TestAuditPackKinds checks them).
const sepBlobs, sepText = 4, len(auditPack) - 4

// UnpackSeparated answers the event a row packed as AuditSeparated packs
// it holds, as UnpackAudit answers it, or ErrSeparator when a text column
// holds a NUL byte (the row's columns cannot be told apart: read it in
// AuditPacked's form).
func UnpackSeparated(packed string, at func(micros int64) time.Time) (toolplane.AuditEvent, error) {
	r := columns{form: formSeparated, size: len(packed)}
	s := packed
	for i := range r.blobs {
		v, rest, ok := lengthPrefixed(s)
		if !ok {
			return toolplane.AuditEvent{}, fmt.Errorf("%w at byte %d", errPacked, len(packed)-len(s))
		}
		r.blobs[i], s = v, rest
	}
	if strings.Count(s, "\x00") != sepText-1 {
		return toolplane.AuditEvent{}, ErrSeparator
	}
	r.s = s
	return r.read(at)
}

// UnpackBinary answers the event whose columns, in AuditColumns' order,
// are vals, as UnpackAudit answers it: a text or a byte string as its
// bytes (nil as empty), an integer as 8 or 4 bytes big-endian, a boolean
// as one byte (not 0: true), as PostgreSQL's binary format has them. The
// event keeps none of vals' memory: its strings share one allocation, and
// its byte strings another.
func UnpackBinary(vals [][]byte, at func(micros int64) time.Time) (toolplane.AuditEvent, error) {
	if len(vals) != len(auditPack) {
		return toolplane.AuditEvent{}, fmt.Errorf("%w: %d columns", errPacked, len(vals))
	}
	n := 0
	for i, v := range vals {
		if k := auditPack[i].kind; k == PackText || k == PackBytes {
			n += len(v)
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i, v := range vals {
		if k := auditPack[i].kind; k == PackText || k == PackBytes {
			b.Write(v)
		}
	}
	r := columns{form: formBinary, s: b.String(), vals: vals, size: n}
	return r.read(at)
}
