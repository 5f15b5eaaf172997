package cli

import "testing"

func TestCellWritesNoControlCharacter(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"Refund an order.\nThen tell them.": "Refund an order. Then tell them.",
		"\x1b[2J\x1b]0;pwned\x07title":      " [2J ]0;pwned title",
		"":                                  "-",
	}
	for in, want := range cases {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}
