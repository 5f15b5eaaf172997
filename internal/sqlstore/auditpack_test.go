package sqlstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// auditRow is one audit_events row's columns as a database hands them
// over in text: an integer in decimal, a boolean as 1 or 0.
type auditRow [AuditColumnCount]string

// packed answers the row in AuditPacked's form.
func (r *auditRow) packed() string {
	var b strings.Builder
	for _, v := range r {
		b.WriteString(strconv.Itoa(len(v)) + ":" + v)
	}
	return b.String()
}

// separated answers the row in AuditSeparated's form.
func (r *auditRow) separated() string {
	var b strings.Builder
	var text []string
	for i, v := range r {
		if PackKindOf(i) == PackBytes {
			b.WriteString(strconv.Itoa(len(v)) + ":" + v)
		} else {
			text = append(text, v)
		}
	}
	b.WriteString(strings.Join(text, "\x00"))
	return b.String()
}

// binary answers the row's columns in PostgreSQL's binary format.
func (r *auditRow) binary(t *testing.T) [][]byte {
	out := make([][]byte, len(r))
	for i, v := range r {
		switch PackKindOf(i) {
		case PackInt:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = binary.BigEndian.AppendUint64(nil, uint64(n))
		case PackBool:
			out[i] = []byte{v[0] - '0'}
		default:
			if v != "" {
				out[i] = []byte(v)
			}
		}
	}
	return out
}

// oddRow answers a row whose values hold colons, digits, bytes that are
// not UTF-8 and NUL bytes in its byte strings.
func oddRow() auditRow {
	var r auditRow
	for i := range r {
		switch PackKindOf(i) {
		case PackInt:
			r[i] = strconv.Itoa(-3 * (i + 1) << 20)
		case PackBool:
			r[i] = strconv.Itoa(i % 2)
		case PackBytes:
			r[i] = fmt.Sprintf("\x00%d:\xff\x00:", i)
		default:
			r[i] = fmt.Sprintf("%d:v%d:é", i, i)
		}
	}
	r[17] = "" // an empty text (reason)
	r[36] = `["email","a,b"]`
	r[37] = `["pii"]`
	return r
}

func micros(m int64) time.Time { return time.UnixMicro(m).UTC() }

// TestAuditForms: a row read in each form (AuditPacked's,
// AuditSeparated's, binary) is the same event.
func TestAuditForms(t *testing.T) {
	t.Parallel()
	bare := auditRow{}
	for i := range bare {
		switch PackKindOf(i) {
		case PackInt, PackBool:
			bare[i] = "0"
		}
	}
	for name, row := range map[string]auditRow{"odd": oddRow(), "bare": bare} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, err := UnpackAudit(row.packed(), micros)
			if err != nil {
				t.Fatal(err)
			}
			if name == "odd" && (want.OrganizationID != "0:v0:é" || want.Reason != "" || len(want.Hash) != len(row[43]) ||
				want.Seq != int64(-3*42<<20) || len(want.PIIFields) != 2) {
				t.Fatalf("packed read as %+v", want)
			}
			sep, err := UnpackSeparated(row.separated(), micros)
			if err != nil {
				t.Fatal(err)
			}
			bin, err := UnpackBinary(row.binary(t), micros)
			if err != nil {
				t.Fatal(err)
			}
			for form, got := range map[string]any{"separated": sep, "binary": bin} {
				if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
					t.Errorf("%s form read as\n%+v\npacked as\n%+v", form, got, want)
				}
			}
		})
	}
}

// TestAuditSeparatedNUL: a text holding a NUL byte (which would shift the
// columns after it) is told apart, and the packed form reads it.
func TestAuditSeparatedNUL(t *testing.T) {
	t.Parallel()
	row := oddRow()
	row[17] = "a\x00b"
	if _, err := UnpackSeparated(row.separated(), micros); !errors.Is(err, ErrSeparator) {
		t.Fatalf("UnpackSeparated = %v; want ErrSeparator", err)
	}
	e, err := UnpackAudit(row.packed(), micros)
	if err != nil || e.Reason != "a\x00b" {
		t.Fatalf("UnpackAudit = %q, %v", e.Reason, err)
	}
}

// TestAuditFormsMalformed: rows that are not in their form are refused,
// never read as another event.
func TestAuditFormsMalformed(t *testing.T) {
	t.Parallel()
	row := oddRow()
	sep := row.separated()
	bin := row.binary(t)
	short := append([][]byte(nil), bin...)
	short[14] = short[14][:3] // latency_micros: 3 bytes
	boolWide := append([][]byte(nil), bin...)
	boolWide[13] = []byte{0, 1} // replayed
	cases := []struct {
		name string
		read func() error
	}{
		{"packed cut short", func() error { _, err := UnpackAudit(row.packed()[:40], micros); return err }},
		{"packed with more", func() error { _, err := UnpackAudit(row.packed()+"0:", micros); return err }},
		{"separated with a column less", func() error {
			_, err := UnpackSeparated(sep[:strings.LastIndexByte(sep, 0)], micros)
			return err
		}},
		{"separated with a byte string's length wrong", func() error {
			_, err := UnpackSeparated("99"+sep[1:], micros)
			return err
		}},
		{"separated integer not a number", func() error {
			r := oddRow()
			r[14] = "x"
			_, err := UnpackSeparated(r.separated(), micros)
			return err
		}},
		{"binary integer of 3 bytes", func() error { _, err := UnpackBinary(short, micros); return err }},
		{"binary boolean of 2 bytes", func() error { _, err := UnpackBinary(boolWide, micros); return err }},
		{"binary with a column less", func() error { _, err := UnpackBinary(bin[:len(bin)-1], micros); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := c.read(); err == nil {
				t.Fatal("read; want an error")
			}
		})
	}
}

// TestAuditPackKinds: AuditSeparated's form has as many byte strings as
// the columns hold.
func TestAuditPackKinds(t *testing.T) {
	t.Parallel()
	n := 0
	for i := range AuditColumnCount {
		if PackKindOf(i) == PackBytes {
			n++
		}
	}
	if n != sepBlobs || AuditColumnCount-n != sepText {
		t.Fatalf("%d byte strings of %d columns; the separated form holds %d and %d", n, AuditColumnCount, sepBlobs, sepText)
	}
	if got := strings.Count(AuditColumns, ",") + 1; got != AuditColumnCount {
		t.Fatalf("AuditColumns names %d columns, auditPack %d", got, AuditColumnCount)
	}
}
