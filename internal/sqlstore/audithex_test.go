package sqlstore

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Each hex column's index names it among AuditColumns, and AuditSelect
// reads it, and only it, through HexRead.
func TestHexColumnsAreAuditColumns(t *testing.T) {
	t.Parallel()
	for _, i := range []int{HexArgumentsHash, HexOutputHash, HexTraceID, HexSpanID, HexKey} {
		c := hexAt(i)
		if c == nil || auditPack[i].col != c.col {
			t.Errorf("column %d is %s, not the hex column %+v", i, auditPack[i].col, c)
		}
	}
	cols := strings.Split(strings.Join(strings.Fields(AuditColumns), ""), ",")
	want := make([]string, len(cols))
	for i, col := range cols {
		want[i] = col
		switch {
		case i == HexKey:
			want[i] = "iif(typeof(key) = 'blob', CAST(substr(key, 1, length(key) - 32) AS TEXT) || lower(hex(substr(key, -32))), key)"
		case hexAt(i) != nil:
			want[i] = "iif(typeof(" + col + ") = 'blob', " + map[bool]string{true: "'sha256:' || ", false: ""}[i == HexOutputHash] +
				"lower(hex(" + col + ")), " + col + ")"
		}
	}
	if got := SQLite.AuditSelect(""); got != strings.Join(want, ", ") {
		t.Errorf("SQLite reads\n%s\nwant\n%s", got, strings.Join(want, ", "))
	}
	if got := Postgres.AuditSelect(""); got != AuditColumns {
		t.Errorf("PostgreSQL reads %s", got)
	}
	if got := SQLite.AuditSelect("e"); !strings.Contains(got, "e.organization_id, e.id,") || !strings.Contains(got, "iif(typeof(e.output_hash) = 'blob', 'sha256:' || lower(hex(e.output_hash)), e.output_hash)") {
		t.Errorf("qualified: %s", got)
	}
}

// A hex column's value is packed only when it is exactly its prefix and
// its count of lowercase hex digits, into the bytes they spell.
func TestPackHex(t *testing.T) {
	t.Parallel()
	digits := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name string
		col  int
		v    string
		ok   bool
	}{
		{"arguments hash", HexArgumentsHash, digits, true},
		{"arguments hash, uppercase", HexArgumentsHash, strings.ToUpper(digits), false},
		{"arguments hash, short", HexArgumentsHash, digits[:62], false},
		{"arguments hash, long", HexArgumentsHash, digits + "00", false},
		{"arguments hash, prefixed", HexArgumentsHash, "sha256:" + digits, false},
		{"arguments hash, not hex", HexArgumentsHash, digits[:63] + "g", false},
		{"arguments hash, empty", HexArgumentsHash, "", false},
		{"output hash", HexOutputHash, "sha256:" + digits, true},
		{"output hash, no prefix", HexOutputHash, digits + "1234567", false},
		{"output hash, another prefix", HexOutputHash, "sha512:" + digits, false},
		{"output hash, uppercase", HexOutputHash, "sha256:" + strings.ToUpper(digits), false},
		{"trace id", HexTraceID, digits[:32], true},
		{"trace id, odd", HexTraceID, digits[:31], false},
		{"span id", HexSpanID, digits[16:32], true},
		{"span id, a name", HexSpanID, "span-one-xyzabcd", false},
		{"derived key", HexKey, "3:run,7:agent-1,5:run-1,5:agent,64:" + digits, true},
		{"derived key, not UTF-8 before", HexKey, "\xff:" + digits, true},
		{"key, the digits alone", HexKey, digits, true},
		{"key, a caller's", HexKey, "k-1", false},
		{"key, short digits", HexKey, "64:" + digits[:63], false},
		{"key, uppercase digits", HexKey, "64:" + strings.ToUpper(digits), false},
		{"key, empty", HexKey, "", false},
		{"not a hex column", 0, digits, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := PackHex([]byte("x"), tt.col, tt.v)
			if ok != tt.ok {
				t.Fatalf("PackHex(%d, %q) ok = %v; want %v", tt.col, tt.v, ok, tt.ok)
			}
			if !ok {
				if string(got) != "x" {
					t.Errorf("PackHex appended %q to a value it does not pack", got[1:])
				}
				return
			}
			// What the SQL expression reads back: the prefix (or the
			// text stored before the digits' bytes) and the bytes in
			// lowercase hex.
			c := hexAt(tt.col)
			stored := got[1:]
			text := c.prefix
			if c.anyText {
				text = string(stored[:len(stored)-c.digits/2])
			}
			back := text + hex.EncodeToString(stored[len(stored)-c.digits/2:])
			if back != tt.v || len(stored) != len(tt.v)-c.digits/2-len(c.prefix) {
				t.Errorf("PackHex(%q) = %x, read back as %q", tt.v, got[1:], back)
			}
		})
	}
}
