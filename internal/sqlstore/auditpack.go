package sqlstore

import (
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
var auditPack = []struct {
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

// errPacked is a packed row that is not AuditPacked's form.
var errPacked = errors.New("malformed packed audit row")

// unpacker reads AuditPacked's fields in order.
type unpacker struct {
	s   string
	err error
}

func (u *unpacker) next() string {
	if u.err != nil {
		return ""
	}
	i := strings.IndexByte(u.s, ':')
	if i < 0 {
		u.err = errPacked
		return ""
	}
	n := 0
	if i > 0 {
		var err error
		if n, err = strconv.Atoi(u.s[:i]); err != nil || n < 0 || n > len(u.s)-i-1 {
			u.err = errPacked
			return ""
		}
	}
	v := u.s[i+1 : i+1+n]
	u.s = u.s[i+1+n:]
	return v
}

func (u *unpacker) int() int64 {
	v := u.next()
	if u.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		u.err = errPacked
	}
	return n
}

func (u *unpacker) bool() bool {
	switch u.next() {
	case "1", "t", "true":
		return true
	case "0", "f", "false":
		return false
	}
	u.err = errPacked
	return false
}

// UnpackAudit answers the event a packed row (AuditPacked) holds, as the
// stores' scans of AuditColumns answer it. Its strings share the packed
// row's memory, and its byte strings one allocation: a row costs the
// driver's value and about two allocations more. at is the store's
// reading of a time in microseconds.
func UnpackAudit(packed string, at func(micros int64) time.Time) (toolplane.AuditEvent, error) {
	var (
		e toolplane.AuditEvent
		u = unpacker{s: packed}
	)
	text := u.next
	e.OrganizationID, e.ID, e.RunID, e.AgentID = text(), text(), text(), text()
	e.PrincipalID, e.UserID, e.Tool, e.ToolVersion = text(), text(), text(), text()
	e.Source, e.Outcome, e.ArgumentsHash = toolplane.Source(text()), text(), text()
	e.ApprovalID, e.AuthorizedBy, e.Replayed = text(), text(), u.bool()
	e.LatencyMicros = u.int()
	created := u.int()
	e.Key, e.Reason, e.ConnectionID, e.PolicyDecision = text(), text(), text(), text()
	e.PolicyBundle, e.PolicyRule, e.PolicyDegraded = u.int(), text(), u.bool()
	input := u.next()
	e.ParentID, e.Kind, e.Subject, e.TenantID = text(), toolplane.AuditKind(text()), text(), text()
	e.StepPath, e.KeyID, e.Effect, e.Destructive = text(), text(), toolplane.Effect(text()), u.bool()
	e.TraceID, e.SpanID, e.ApproverID = text(), text(), text()
	args := u.next()
	pii, classes, outputHash := text(), text(), text()
	e.OutputHash = outputHash
	e.CostCents = u.int()
	e.Attempts = int(u.int())
	e.Seq = u.int()
	prev, hash := u.next(), u.next()
	if u.err == nil && u.s != "" {
		u.err = errPacked
	}
	if u.err != nil {
		return e, fmt.Errorf("%w at byte %d", u.err, len(packed)-len(u.s))
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
