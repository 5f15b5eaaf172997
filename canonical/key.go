package canonical

import (
	"fmt"
	"strconv"
	"strings"
)

// Key encodes parts as one idempotency key. Each part is written as its
// length in bytes (decimal, no leading zeros), ':' and its bytes, with ','
// between parts: Key("run-1", "agent") is "5:run-1,5:agent", Key("") is
// "0:" and Key() is "".
//
// The lengths are what make the key safe to compare. Parts come from callers
// and tool arguments and may hold any byte, ':' and ',' included, so joining
// them with a separator would let ["a:b", "c"] and ["a", "b:c"] share a key
// and one call replay another's result. With each part's extent stated before
// its bytes, the encoding is a bijection: no two different part lists encode
// alike, and SplitKey recovers the parts exactly.
func Key(parts ...string) string {
	if len(parts) == 0 {
		return ""
	}
	size := len(parts) - 1
	for _, p := range parts {
		size += len(p) + 1 + decimalLen(len(p))
	}
	var b strings.Builder
	b.Grow(size)
	var num [20]byte
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(num[:0], int64(len(p)), 10))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// SplitKey returns the parts Key encoded into key. It refuses, with
// ErrMalformedKey, anything Key could not have produced: a length that is
// missing, has a leading zero or runs past the end, a missing ':', and a
// missing, extra or trailing ','. So for every key it accepts,
// Key(SplitKey(key)...) == key.
func SplitKey(key string) ([]string, error) {
	if key == "" {
		return nil, nil
	}
	var parts []string
	for i := 0; ; {
		start := i
		n := 0
		for i < len(key) && '0' <= key[i] && key[i] <= '9' {
			if i > start && key[start] == '0' {
				return nil, fmt.Errorf("%w: length at offset %d has a leading zero", ErrMalformedKey, start)
			}
			n = n*10 + int(key[i]-'0')
			if n > len(key) {
				// Checked per digit, so n cannot overflow.
				return nil, fmt.Errorf("%w: length at offset %d runs past the end", ErrMalformedKey, start)
			}
			i++
		}
		if i == start {
			return nil, fmt.Errorf("%w: no length at offset %d", ErrMalformedKey, start)
		}
		if i == len(key) || key[i] != ':' {
			return nil, fmt.Errorf("%w: no ':' after the length at offset %d", ErrMalformedKey, start)
		}
		i++
		if n > len(key)-i {
			return nil, fmt.Errorf("%w: length at offset %d runs past the end", ErrMalformedKey, start)
		}
		parts = append(parts, key[i:i+n])
		i += n
		if i == len(key) {
			return parts, nil
		}
		if key[i] != ',' {
			return nil, fmt.Errorf("%w: no ',' after the part at offset %d", ErrMalformedKey, start)
		}
		i++
		if i == len(key) {
			return nil, fmt.Errorf("%w: trailing ','", ErrMalformedKey)
		}
	}
}

// decimalLen is the number of decimal digits of n >= 0.
func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
