package boundary

// Scanning strings byte by byte is most of the cost of normalising and
// measuring a large answer, and almost all of those bytes are plain ASCII.
// These helpers test eight bytes at once and let the scanners skip a word
// that needs no attention. A word they flag may still be fine; the caller
// then looks at it byte by byte, so a false alarm costs time, never
// correctness.

const (
	ones  = 0x0101010101010101 // 0x01 in every byte
	highs = 0x8080808080808080 // the top bit of every byte
)

// load64 reads the eight bytes of s from i, the first byte lowest. On the
// common 64-bit targets the compiler turns this pattern into a single load.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hasZeroByte is non-zero exactly when some byte of w is zero.
func hasZeroByte(w uint64) uint64 { return (w - ones) & ^w & highs }

// hasByteBelow is non-zero exactly when some byte of w is below n, for n at
// most 0x80. A byte with its top bit set is not reported; callers test for
// those separately.
func hasByteBelow(w uint64, n byte) uint64 { return (w - ones*uint64(n)) & ^w & highs }

// cleanWord reports whether all eight bytes are printable ASCII (0x20 to
// 0x7e), none of which cleanString changes.
func cleanWord(w uint64) bool {
	return (w&highs)|hasByteBelow(w, 0x20)|hasZeroByte(w^(ones*0x7f)) == 0
}

// plainWord reports whether all eight bytes are ASCII that a JSON string
// holds as they are: no control byte, quote or backslash.
func plainWord(w uint64) bool {
	return (w&highs)|hasByteBelow(w, 0x20)|hasZeroByte(w^(ones*'"'))|hasZeroByte(w^(ones*'\\')) == 0
}
