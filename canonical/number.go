package canonical

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// appendFloat writes f in canonical number form. bitSize is the precision f
// came from, so that a float32 keeps its own shortest digits instead of the
// float64 expansion of its binary value.
func appendFloat(dst []byte, f float64, bitSize int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%w: %v has no JSON form", ErrInvalidNumber, f)
	}
	var tmp [32]byte
	return appendNumber(dst, strconv.AppendFloat(tmp[:0], f, 'g', -1, bitSize))
}

// appendNumber checks that s is JSON number syntax and writes its value in
// canonical form (see Append). It works on the text alone, never through a
// float, so every digit survives.
func appendNumber[T string | []byte](dst []byte, s T) ([]byte, error) {
	// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
	i := 0
	neg := i < len(s) && s[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return dst, invalidNumber(s)
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		fracStart = i + 1
		if i = skipDigits(s, fracStart); i == fracStart {
			return dst, invalidNumber(s)
		}
		fracEnd = i
	}
	expNeg := false
	expStart, expEnd := i, i
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		expStart = i
		if i = skipDigits(s, expStart); i == expStart {
			return dst, invalidNumber(s)
		}
		expEnd = i
	}
	if i != len(s) {
		return dst, invalidNumber(s)
	}

	d := digitSeq[T]{a: s[intStart:intEnd], b: s[fracStart:fracEnd]}
	n := d.len()
	lead := 0
	for lead < n && d.at(lead) == '0' {
		lead++
	}
	if lead == n {
		// Every zero is the same zero, whatever its sign or exponent.
		return append(dst, '0'), nil
	}
	last := n - 1
	for d.at(last) == '0' {
		last--
	}
	// The value is d[lead..last] × 10^(exp - len(frac) + trailing zeros); the
	// exponent of its scientific form, d.ddd × 10^sci, is that plus the
	// number of digits after the first. adj collects every term but exp; its
	// size is bounded by the length of the text.
	adj := int64(n-1-last) - int64(fracEnd-fracStart) + int64(last-lead)

	if neg {
		dst = append(dst, '-')
	}
	for expStart < expEnd && s[expStart] == '0' {
		expStart++
	}
	if expEnd-expStart > 18 {
		return appendHugeExponent(dst, d, lead, last, expNeg, s[expStart:expEnd], adj), nil
	}
	var exp int64
	for k := expStart; k < expEnd; k++ {
		exp = exp*10 + int64(s[k]-'0')
	}
	if expNeg {
		exp = -exp
	}
	sci := exp + adj
	digitsAfterFirst := int64(last - lead)

	switch {
	case sci < -6 || sci > 20:
		dst = appendMantissa(dst, d, lead, last)
		dst = append(dst, 'e')
		if sci >= 0 {
			dst = append(dst, '+')
		}
		return strconv.AppendInt(dst, sci, 10), nil
	case sci >= digitsAfterFirst:
		// An integer: the digits, then as many zeros as the exponent has
		// places left over (at most 20).
		dst = d.appendRange(dst, lead, last+1)
		for range sci - digitsAfterFirst {
			dst = append(dst, '0')
		}
		return dst, nil
	case sci >= 0:
		point := lead + int(sci) + 1
		dst = d.appendRange(dst, lead, point)
		dst = append(dst, '.')
		return d.appendRange(dst, point, last+1), nil
	default:
		dst = append(dst, '0', '.')
		for range -sci - 1 {
			dst = append(dst, '0')
		}
		return d.appendRange(dst, lead, last+1), nil
	}
}

// appendHugeExponent finishes a number whose written exponent has more than
// 18 digits, which int64 arithmetic cannot be trusted with. Such an exponent
// is at least 10^18 in size while adj is bounded by the length of the text,
// so the value is always far outside plain notation.
func appendHugeExponent[T string | []byte](dst []byte, d digitSeq[T], lead, last int, expNeg bool, expDigits T, adj int64) []byte {
	sci, _ := new(big.Int).SetString(string(expDigits), 10)
	if expNeg {
		sci.Neg(sci)
	}
	sci.Add(sci, big.NewInt(adj))
	dst = appendMantissa(dst, d, lead, last)
	dst = append(dst, 'e')
	if sci.Sign() >= 0 {
		dst = append(dst, '+')
	}
	return sci.Append(dst, 10)
}

// appendMantissa writes d[lead..last] with a point after the first digit,
// leaving the point out when there is only one.
func appendMantissa[T string | []byte](dst []byte, d digitSeq[T], lead, last int) []byte {
	dst = d.appendRange(dst, lead, lead+1)
	if last > lead {
		dst = append(dst, '.')
		dst = d.appendRange(dst, lead+1, last+1)
	}
	return dst
}

// digitSeq is the digits of a number's integer part followed by those of its
// fraction, read as one sequence without copying them together.
type digitSeq[T string | []byte] struct {
	a, b T
}

func (d digitSeq[T]) len() int { return len(d.a) + len(d.b) }

func (d digitSeq[T]) at(k int) byte {
	if k < len(d.a) {
		return d.a[k]
	}
	return d.b[k-len(d.a)]
}

// appendRange appends the digits at positions [from, to).
func (d digitSeq[T]) appendRange(dst []byte, from, to int) []byte {
	na := len(d.a)
	if from < na {
		dst = append(dst, d.a[from:min(to, na)]...)
	}
	if to > na {
		dst = append(dst, d.b[max(from, na)-na:to-na]...)
	}
	return dst
}

func skipDigits[T string | []byte](s T, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// invalidNumber quotes at most the start of s, so a hostile number cannot
// blow up an error message that ends up in a log.
func invalidNumber[T string | []byte](s T) error {
	const maxQuoted = 64
	if len(s) > maxQuoted {
		return fmt.Errorf("%w: %q... (%d bytes)", ErrInvalidNumber, string(s[:maxQuoted]), len(s))
	}
	return fmt.Errorf("%w: %q", ErrInvalidNumber, string(s))
}
