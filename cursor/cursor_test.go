package cursor

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		at    int64
		parts []string
	}{
		{0, nil},
		{-1, []string{""}},
		{1764417600000000, []string{"payments.refund_order", "5:run-1,\x00\xff"}},
	}
	for _, tt := range tests {
		c := Encode(Claims, tt.at, tt.parts...)
		at, parts, err := Decode(c, Claims, len(tt.parts))
		if err != nil || at != tt.at || (len(tt.parts) > 0 && !reflect.DeepEqual(parts, tt.parts)) {
			t.Fatalf("Decode(Encode(%d, %q)) = %d, %q, %v", tt.at, tt.parts, at, parts, err)
		}
	}
}

func TestCursorRefusesWhatEncodeCannotMake(t *testing.T) {
	t.Parallel()
	good := Encode(Audit, 42, "id-1")
	for name, c := range map[string]string{
		"not base64":     "!!!",
		"another list":   Encode(Claims, 42, "id-1"),
		"too few parts":  Encode(Audit, 42),
		"trailing bytes": Encode(Audit, 42, "id-1", "extra"),
		"empty":          "",
		"truncated":      good[:len(good)-2],
		"another format": "AGU",
	} {
		if _, _, err := Decode(c, Audit, 1); !errors.Is(err, ErrMalformed) || !errors.Is(err, toolplane.ErrBadCursor) {
			t.Errorf("%s: err = %v, want ErrMalformed, a toolplane.ErrBadCursor", name, err)
		}
	}
}

// TestCursorRoundTripAtTheStoresEdges: what the stores put in a cursor
// (a claim's tool and key, any byte, the zero time as a NOT NULL column
// holds it) comes back whole, and only for the part count and the list it
// was made for.
func TestCursorRoundTripAtTheStoresEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		createdAt int64
		parts     []string
	}{
		{"claim", 1_741_946_966_535_897, []string{"payments.refund_order", "5:run-1"}},
		{"any byte", -1, []string{"\x00\xff", ""}},
		{"zero time", time.Time{}.UnixMicro(), []string{"id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Encode(Claims, tt.createdAt, tt.parts...)
			at, parts, err := Decode(c, Claims, len(tt.parts))
			if err != nil || at != tt.createdAt || strings.Join(parts, "|") != strings.Join(tt.parts, "|") {
				t.Errorf("decode(encode) = %d, %q, %v", at, parts, err)
			}
			if _, _, err := Decode(c, Claims, len(tt.parts)+1); err == nil {
				t.Error("decoding with one part too many succeeded")
			}
			if _, _, err := Decode(c, Audit, len(tt.parts)); err == nil {
				t.Error("decoding as another list's cursor succeeded")
			}
		})
	}
}
