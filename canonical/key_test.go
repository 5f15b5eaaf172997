package canonical

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestKeyWritesLengthPrefixedParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{"no parts", nil, ""},
		{"one empty part", []string{""}, "0:"},
		{"two empty parts", []string{"", ""}, "0:,0:"},
		{"example", []string{"run-1", "agent"}, "5:run-1,5:agent"},
		{"separators inside parts", []string{"a:b", "c,d"}, "3:a:b,3:c,d"},
		{"multi-digit length", []string{strings.Repeat("x", 12)}, "12:" + strings.Repeat("x", 12)},
		{"length counts bytes", []string{"é"}, "2:é"},
		{"any byte", []string{"\x00\xff"}, "2:\x00\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Key(tt.parts...); got != tt.want {
				t.Errorf("Key(%q) = %q, want %q", tt.parts, got, tt.want)
			}
		})
	}
}

func TestSplitKeyInvertsKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		parts []string
	}{
		{"no parts", nil},
		{"one empty part", []string{""}},
		{"empty parts around one", []string{"", "x", ""}},
		{"plain", []string{"run-1", "agent", "payments.refund_order"}},
		{"separators", []string{":", ",", "1:a", "0:,0:"}},
		{"looks like a key", []string{Key("a", "b")}},
		{"long part", []string{strings.Repeat("ab", 5000), "z"}},
		{"binary", []string{"\x00", "\xff\xfe", "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := Key(tt.parts...)
			got, err := SplitKey(key)
			if err != nil {
				t.Fatalf("SplitKey(%q): %v", key, err)
			}
			if !slices.Equal(got, tt.parts) {
				t.Errorf("SplitKey(Key(%q)) = %q", tt.parts, got)
			}
		})
	}
}

func TestSplitKeyRefusesWhatKeyCannotProduce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
	}{
		{"no colon", "1"},
		{"no length", ":"},
		{"no length before a part", ":a"},
		{"length without part", "1:"},
		{"part shorter than length", "3:ab"},
		{"part longer than length", "1:ab"},
		{"leading zero", "01:a"},
		{"double zero", "00:"},
		{"leading zero on a later part", "1:a,02:bc"},
		{"trailing comma", "1:a,"},
		{"leading comma", ",1:a"},
		{"double comma", "1:a,,1:b"},
		{"missing comma", "1:a1:b"},
		{"wrong separator", "1:a;1:b"},
		{"negative length", "-1:a"},
		{"plus sign", "+1:a"},
		{"space", " 1:a"},
		{"letter in length", "1a:a"},
		{"non-ASCII digit", "١:a"},
		{"length past the end", "5:abc"},
		{"length overflowing int", "99999999999999999999999999:a"},
		{"only a comma", ","},
		{"empty part then comma", "0:,"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parts, err := SplitKey(tt.key)
			if !errors.Is(err, ErrMalformedKey) {
				t.Errorf("SplitKey(%q) = %q, %v; want ErrMalformedKey", tt.key, parts, err)
			}
		})
	}
}

// Joining parts with a separator would give these pairs one key; the length
// prefixes must keep them apart.
func TestPartListsThatNaiveJoiningMergesGetDistinctKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b []string
	}{
		{"colon moves between parts", []string{"a:b", "c"}, []string{"a", "b:c"}},
		{"comma inside a part", []string{"a,b"}, []string{"a", "b"}},
		{"empty part or none", []string{""}, nil},
		{"one empty part or two", []string{""}, []string{"", ""}},
		{"concatenation", []string{"ab", "c"}, []string{"a", "bc"}},
		{"part that spells an encoding", []string{"1:a,1:b"}, []string{"a", "b"}},
		{"digits moving into the length", []string{"1", "23"}, []string{"12", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ka, kb := Key(tt.a...), Key(tt.b...)
			if ka == kb {
				t.Errorf("Key(%q) and Key(%q) are both %q", tt.a, tt.b, ka)
			}
		})
	}
}
