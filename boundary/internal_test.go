package boundary

import "testing"

// Bounding decides whether a marker fits before it builds one, so the
// arithmetic must agree with the encoder exactly.
func TestMarkerSizeMatchesEncoding(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 9, 10, 99, 100, 40960, 1 << 20, 1<<31 - 1} {
		if got, want := markerSize(n), Size(Marker(n, nil)); got != want {
			t.Errorf("markerSize(%d) = %d, Size(Marker) = %d", n, got, want)
		}
	}
}

// The word tests let the string scanners skip eight bytes at a time; a word
// they call clean must be clean byte by byte, or a control character would
// slip through.
func TestWordTestsMatchByteTests(t *testing.T) {
	t.Parallel()
	cleanByte := func(c byte) bool { return c >= 0x20 && c < 0x7f }
	plainByte := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	check := func(word [8]byte) {
		s := string(word[:])
		wantClean, wantPlain := true, true
		for _, c := range word {
			wantClean = wantClean && cleanByte(c)
			wantPlain = wantPlain && plainByte(c)
		}
		w := load64(s, 0)
		if cleanWord(w) && !wantClean {
			t.Fatalf("cleanWord(%q) = true", s)
		}
		if plainWord(w) && !wantPlain {
			t.Fatalf("plainWord(%q) = true", s)
		}
		// A word that is clean must also be recognised as such, or the
		// fast path would never run.
		if cleanWord(w) != wantClean || plainWord(w) != wantPlain {
			t.Fatalf("word tests on %q: clean %v plain %v, want %v %v", s, cleanWord(w), plainWord(w), wantClean, wantPlain)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', ' ', '~', 0x00, 0x1f, 0x7f, 0x80, 0xff, '"', '\\'} {
				word := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
				word[pos] = byte(c)
				check(word)
			}
		}
	}
}
