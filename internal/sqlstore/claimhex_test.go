package sqlstore

import (
	"encoding/hex"
	"strings"
	"testing"
)

// A claim key packs only when it is exactly of a derived key's form, and
// then into its text before the digits and their bytes, which read back
// as the key; two keys never pack alike.
func TestPackClaimKey(t *testing.T) {
	t.Parallel()
	digits := strings.Repeat("0123456789abcdef", 4)
	derived := "3:run,7:agent-1,5:run-1,5:agent,64:" + digits
	tests := []struct {
		name, key string
		ok        bool
	}{
		{"derived", derived, true},
		{"derived for a person", "3:run,7:agent-1,3:for,4:opal,0:,5:run-1,5:agent,64:" + digits, true},
		{"derived, not UTF-8 in a part", "3:run,7:agent-\xff,5:run-1,5:agent,64:" + digits, true},
		{"the shortest", "3:run,,64:" + digits, true},
		{"derived, a NUL byte in a part", "3:run,7:agent\x001,5:run-1,5:agent,64:" + digits, false},
		{"derived, uppercase digits", "3:run,7:agent-1,5:run-1,5:agent,64:" + strings.ToUpper(digits), false},
		{"derived, short digits", derived[:len(derived)-1], false},
		{"derived, a digit too many", derived + "0", false},
		{"derived, not hex", derived[:len(derived)-1] + "g", false},
		{"derived, another last part", "3:run,7:agent-1,5:run-1,5:agent,65:x" + digits, false},
		{"a caller's", "6:caller,7:agent-1,3:k-1", false},
		{"a caller's ending with digits", "6:caller,7:agent-1,64:" + digits, false},
		{"the digits alone", digits, false},
		{"empty", "", false},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := PackClaimKey([]byte("x"), tt.key)
			if ok != tt.ok {
				t.Fatalf("PackClaimKey(%q) ok = %v; want %v", tt.key, ok, tt.ok)
			}
			arg := ClaimKeyArg(tt.key)
			if !ok {
				if string(got) != "x" {
					t.Errorf("PackClaimKey appended %q to a key it does not pack", got[1:])
				}
				if s, isText := arg.(string); !isText || s != tt.key {
					t.Errorf("ClaimKeyArg(%q) = %#v; want the text", tt.key, arg)
				}
				return
			}
			stored := got[1:]
			if b, isBytes := arg.([]byte); !isBytes || string(b) != string(stored) {
				t.Errorf("ClaimKeyArg(%q) = %#v; want %x", tt.key, arg, stored)
			}
			// What ClaimKeyRead reads back: the bytes but the last 32,
			// then those in lowercase hex.
			back := string(stored[:len(stored)-32]) + hex.EncodeToString(stored[len(stored)-32:])
			if back != tt.key || len(stored) != len(tt.key)-32 {
				t.Errorf("PackClaimKey(%q) = %x, read back as %q", tt.key, stored, back)
			}
			if other, dup := seen[string(stored)]; dup {
				t.Errorf("%q and %q pack alike", tt.key, other)
			}
			seen[string(stored)] = tt.key
		})
	}
}

// A request hash is not stored when its key is derived and ends with its
// digits, packed when it is 64 lowercase hex digits, and text otherwise.
func TestClaimHashArg(t *testing.T) {
	t.Parallel()
	digits := strings.Repeat("0123456789abcdef", 4)
	other := strings.Repeat("fedcba9876543210", 4)
	derived := "3:run,7:agent-1,5:run-1,5:agent,64:" + digits
	tests := []struct {
		name, key, hash string
		want            any
	}{
		{"a derived key's own digits", derived, digits, SameHash},
		{"another hash than a derived key's", derived, other, mustUnhex(other)},
		{"a caller's key", "6:caller,7:agent-1,3:k-1", digits, mustUnhex(digits)},
		{"a caller's key ending with the digits", "6:caller,7:agent-1,64:" + digits, digits, mustUnhex(digits)},
		{"uppercase", derived, strings.ToUpper(digits), strings.ToUpper(digits)},
		{"prefixed", derived, "sha256:" + digits, "sha256:" + digits},
		{"short", derived, digits[1:], digits[1:]},
		{"empty", derived, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClaimHashArg(tt.key, tt.hash)
			switch want := tt.want.(type) {
			case []byte:
				if b, ok := got.([]byte); !ok || string(b) != string(want) {
					t.Errorf("ClaimHashArg = %#v; want %x", got, want)
				}
			default:
				if got != tt.want {
					t.Errorf("ClaimHashArg = %#v; want %#v", got, tt.want)
				}
			}
		})
	}
}

// ClaimSelect reads the key and the request hash back as text on SQLite,
// and is ClaimColumns on PostgreSQL.
func TestClaimSelect(t *testing.T) {
	t.Parallel()
	if got := Postgres.ClaimSelect(); got != ClaimColumns {
		t.Errorf("PostgreSQL reads %s", got)
	}
	got := strings.Join(strings.Fields(SQLite.ClaimSelect()), " ")
	want := strings.Join(strings.Fields(ClaimColumns), " ")
	want = strings.Replace(want, " key, request_hash,", " "+ClaimKeyRead("key")+", "+ClaimHashRead("request_hash", "key")+",", 1)
	if got != want {
		t.Errorf("SQLite reads\n%s\nwant\n%s", got, want)
	}
}

func mustUnhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
