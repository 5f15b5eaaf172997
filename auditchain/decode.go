package auditchain

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
)

// DecodeEvent decodes one exported event (an AuditEvent as JSON) into e,
// with exactly json.Unmarshal's result and errors into a zero event:
// offline verification hashes what was exported, so the decoding must not
// differ from the one the export's reader would make. encoding/json's
// reflection is most of what offline verification costs, so the form
// encoding/json writes (exact field names, each once, strings without
// escapes, integers, no null) is decoded directly, and anything else —
// escapes, unknown or repeated names, null, an error — by json.Unmarshal.
func DecodeEvent(data []byte, e *toolplane.AuditEvent) error {
	*e = toolplane.AuditEvent{}
	if decodeFast(data, e) {
		return nil
	}
	*e = toolplane.AuditEvent{}
	return json.Unmarshal(data, e)
}

// eventDecoder is the direct decoding's state: the line, its copy as one
// string (every string field is a piece of it: one allocation for them
// all), where it stands and the names it has read.
type eventDecoder struct {
	data []byte
	s    string
	i    int
	seen uint64
}

// decodeFast decodes data into e when it has the form encoding/json
// writes, answering false (e half set) when it does not.
func decodeFast(data []byte, e *toolplane.AuditEvent) bool {
	d := eventDecoder{data: data}
	d.ws()
	if !d.byte('{') {
		return false
	}
	d.ws()
	if d.byte('}') {
		return d.end()
	}
	d.s = string(data)
	for {
		key, ok := d.plainString()
		if !ok {
			return false
		}
		d.ws()
		if !d.byte(':') {
			return false
		}
		d.ws()
		if !d.field(key, e) {
			return false
		}
		d.ws()
		if d.byte(',') {
			d.ws()
			continue
		}
		if !d.byte('}') {
			return false
		}
		return d.end()
	}
}

// field decodes the value of the member named key.
func (d *eventDecoder) field(key string, e *toolplane.AuditEvent) bool {
	var bit uint64
	ok := true
	str := func(p *string, n uint) {
		bit = 1 << n
		*p, ok = d.plainString()
	}
	switch key {
	case "id":
		str(&e.ID, 0)
	case "organization_id":
		str(&e.OrganizationID, 1)
	case "kind":
		var s string
		str(&s, 2)
		e.Kind = toolplane.AuditKind(s)
	case "subject":
		str(&e.Subject, 3)
	case "tenant_id":
		str(&e.TenantID, 4)
	case "run_id":
		str(&e.RunID, 5)
	case "step_path":
		str(&e.StepPath, 6)
	case "agent_id":
		str(&e.AgentID, 7)
	case "principal_id":
		str(&e.PrincipalID, 8)
	case "user_id":
		str(&e.UserID, 9)
	case "key_id":
		str(&e.KeyID, 10)
	case "tool":
		str(&e.Tool, 11)
	case "tool_version":
		str(&e.ToolVersion, 12)
	case "effect":
		var s string
		str(&s, 13)
		e.Effect = toolplane.Effect(s)
	case "destructive":
		bit = 1 << 14
		e.Destructive, ok = d.bool()
	case "source":
		var s string
		str(&s, 15)
		e.Source = toolplane.Source(s)
	case "trace_id":
		str(&e.TraceID, 16)
	case "span_id":
		str(&e.SpanID, 17)
	case "outcome":
		str(&e.Outcome, 18)
	case "arguments_hash":
		str(&e.ArgumentsHash, 19)
	case "key":
		str(&e.Key, 20)
	case "reason":
		str(&e.Reason, 21)
	case "approval_id":
		str(&e.ApprovalID, 22)
	case "authorized_by":
		str(&e.AuthorizedBy, 23)
	case "approver_id":
		str(&e.ApproverID, 24)
	case "arguments":
		bit = 1 << 25
		e.Arguments, ok = d.raw()
	case "pii_fields_touched":
		bit = 1 << 26
		e.PIIFields, ok = d.strings()
	case "classifications":
		bit = 1 << 27
		e.Classifications, ok = d.strings()
	case "output_hash":
		str(&e.OutputHash, 28)
	case "cost_cents":
		bit = 1 << 29
		e.CostCents, ok = d.int()
	case "attempts":
		bit = 1 << 30
		var n int64
		n, ok = d.int()
		e.Attempts = int(n)
		ok = ok && int64(e.Attempts) == n
	case "connection_id":
		str(&e.ConnectionID, 31)
	case "parent_id":
		str(&e.ParentID, 32)
	case "policy_decision":
		str(&e.PolicyDecision, 33)
	case "policy_bundle":
		bit = 1 << 34
		e.PolicyBundle, ok = d.int()
	case "policy_rule":
		str(&e.PolicyRule, 35)
	case "policy_degraded":
		bit = 1 << 36
		e.PolicyDegraded, ok = d.bool()
	case "policy_input":
		bit = 1 << 37
		e.PolicyInput, ok = d.raw()
	case "replayed":
		bit = 1 << 38
		e.Replayed, ok = d.bool()
	case "latency_micros":
		bit = 1 << 39
		e.LatencyMicros, ok = d.int()
	case "created_at":
		bit = 1 << 40
		start := d.i
		if _, ok = d.plainString(); ok {
			ok = e.CreatedAt.UnmarshalJSON(d.data[start:d.i]) == nil
		}
	case "seq":
		bit = 1 << 41
		e.Seq, ok = d.int()
	case "prev_hash":
		bit = 1 << 42
		e.PrevHash, ok = d.base64()
	case "hash":
		bit = 1 << 43
		e.Hash, ok = d.base64()
	default:
		return false // a name encoding/json would match otherwise, or ignore
	}
	if !ok || d.seen&bit != 0 {
		return false // a repeated name: the last would win
	}
	d.seen |= bit
	return true
}

func (d *eventDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *eventDecoder) byte(c byte) bool {
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end: nothing but white space may follow the object.
func (d *eventDecoder) end() bool {
	d.ws()
	return d.i == len(d.data)
}

// plainString reads a string with no escape and valid UTF-8 (what
// encoding/json would answer unchanged), as a piece of d.s.
func (d *eventDecoder) plainString() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	ascii := true
	for ; d.i < len(d.data); d.i++ {
		c := d.data[d.i]
		switch {
		case c == '"':
			v := d.data[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(v) {
				return "", false
			}
			if d.s == "" {
				return string(v), true
			}
			return d.s[start : d.i-1], true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

func (d *eventDecoder) bool() (bool, bool) {
	rest := d.data[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.i += 4
		return true, d.delimited()
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.i += 5
		return false, d.delimited()
	}
	return false, false
}

// delimited: a literal or number ends at white space, ',' or '}'.
func (d *eventDecoder) delimited() bool {
	if d.i == len(d.data) {
		return true
	}
	switch d.data[d.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// int reads an integer as JSON writes one (no fraction, no exponent, no
// leading zero) that fits 64 bits.
func (d *eventDecoder) int() (int64, bool) {
	start := d.i
	d.byte('-')
	digits := d.i
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.data[digits] == '0' && d.i-digits > 1) || !d.delimited() {
		return 0, false
	}
	n, err := strconv.ParseInt(string(d.data[start:d.i]), 10, 64)
	return n, err == nil
}

// strings reads an array of plain strings; an empty array is an empty,
// not a nil, slice, as encoding/json makes it.
func (d *eventDecoder) strings() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	out := make([]string, 0, 2)
	d.ws()
	if d.byte(']') {
		return out, true
	}
	for {
		s, ok := d.plainString()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		d.ws()
		if d.byte(']') {
			return out, true
		}
		if !d.byte(',') {
			return nil, false
		}
		d.ws()
	}
}

// raw reads a JSON document (json.RawMessage: its bytes as written, when
// it is valid JSON), an object or an array.
func (d *eventDecoder) raw() (json.RawMessage, bool) {
	if d.i == len(d.data) || (d.data[d.i] != '{' && d.data[d.i] != '[') {
		return nil, false
	}
	start := d.i
	depth := 0
	for ; d.i < len(d.data); d.i++ {
		switch d.data[d.i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				d.i++
				v := d.data[start:d.i]
				if !json.Valid(v) {
					return nil, false
				}
				return d.keep(v), true
			}
		case '"':
			for d.i++; d.i < len(d.data) && d.data[d.i] != '"'; d.i++ {
				if d.data[d.i] == '\\' {
					d.i++
				}
			}
		}
	}
	return nil, false
}

// base64 reads a []byte as encoding/json writes one: standard base64 in a
// plain string.
func (d *eventDecoder) base64() ([]byte, bool) {
	start := d.i
	if _, ok := d.plainString(); !ok {
		return nil, false
	}
	src := d.data[start+1 : d.i-1]
	buf := d.alloc(base64.StdEncoding.DecodedLen(len(src)))
	n, err := base64.StdEncoding.Decode(buf, src)
	if err != nil {
		return nil, false
	}
	return buf[:n:n], true
}

// keep answers a copy of b, as json.RawMessage makes one.
func (d *eventDecoder) keep(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}

// alloc answers n fresh bytes (never nil, as encoding/json's).
func (d *eventDecoder) alloc(n int) []byte {
	return make([]byte, n)
}
