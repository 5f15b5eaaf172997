package schema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
)

// Numbers. Arguments keep their numbers exact (json.Number), so a number's
// text is what the validator and the handler read. Two rules keep that
// text sane. An integer written as 1e2 or 100.0 is valid JSON Schema
// "integer", but a Go handler cannot decode it into an int64: at a field
// that only takes integers it is rewritten to its plain digits before
// anything (the hash, the preview, the handler) sees it. And a number
// whose magnitude or length no tool could mean (1e1000000, a thousand
// digits) is refused before validation: the reference validator expands
// the exponent into an exact rational, which takes a tenth of a second
// for one such number and longer the larger it is.

// RuleIntegerForm rewrites an integer written with a fraction or exponent
// (1e2, 100.0) at an integer-only field as its plain digits (100). It runs
// by default; the value is unchanged, only its form.
const RuleIntegerForm = "integer_form"

// maxIntegerDigits bounds the plain form RuleIntegerForm writes: past any
// Go integer type, short of an expansion worth refusing.
const maxIntegerDigits = 40

// maxNumberExponent and maxNumberLength bound the numbers validation reads:
// far outside float64 (1e308), and longer than any exact decimal a tool
// takes.
const (
	maxNumberExponent = 400
	maxNumberLength   = 400
)

// parsedNumber is a JSON number split into its parts, as written: the
// integer digits (leading zeros removed), the fraction digits, and the
// exponent.
type parsedNumber struct {
	neg     bool
	intPart string
	frac    string
	exp     int64
}

// parseNumber splits a JSON number literal without allocating. ok is false
// when the literal is not a JSON number or its exponent does not fit an
// int32.
func parseNumber(s string) (p parsedNumber, ok bool) {
	if strings.HasPrefix(s, "-") {
		p.neg, s = true, s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return p, false
		}
		mant, p.exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return p, false
	}
	p.intPart, p.frac = strings.TrimLeft(intPart, "0"), frac
	return p, true
}

// magnitude is the power of ten of the number's leading digit (0 for 1..9),
// or 0 for zero.
func (p parsedNumber) magnitude() int64 {
	if p.intPart != "" {
		return p.exp + int64(len(p.intPart)) - 1
	}
	for i := 0; i < len(p.frac); i++ {
		if p.frac[i] != '0' {
			return p.exp - int64(i) - 1
		}
	}
	return 0
}

// integerForm answers the plain digits of x when x is an integer written
// with a fraction or an exponent, and its plain form is at most
// maxIntegerDigits long.
func integerForm(x json.Number) (json.Number, bool) {
	s := string(x)
	if !strings.ContainsAny(s, ".eE") {
		return "", false
	}
	p, ok := parseNumber(s)
	if !ok {
		return "", false
	}
	// The significant digits, scaled by 10^exp.
	d := strings.TrimLeft(p.intPart+p.frac, "0")
	exp := p.exp - int64(len(p.frac))
	if d == "" {
		return "0", true // zero, however written (-0.0, 0e9)
	}
	if exp < 0 {
		cut := int64(len(d)) + exp
		if cut < 0 || strings.Trim(d[cut:], "0") != "" {
			return "", false // a fraction: not an integer
		}
		d = d[:cut]
	} else {
		if int64(len(d))+exp > maxIntegerDigits {
			return "", false
		}
		d += strings.Repeat("0", int(exp))
	}
	if len(d) > maxIntegerDigits {
		return "", false
	}
	if p.neg {
		d = "-" + d
	}
	return json.Number(d), true
}

// unreadableNumber finds the first number in v too large or too long to
// validate, and answers its pointer. The pointer is built only for the
// number found: the walk itself allocates nothing.
func unreadableNumber(v any) (string, json.Number, bool) {
	var toks []string
	n, bad := findUnreadable(v, &toks)
	if !bad {
		return "", "", false
	}
	var b strings.Builder
	for i := len(toks) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(escape(toks[i]))
	}
	return b.String(), n, true
}

// findUnreadable reports the first unreadable number under v, appending
// the pointer tokens that lead to it innermost first.
func findUnreadable(v any, toks *[]string) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		if len(x) > maxNumberLength {
			return x, true
		}
		p, ok := parseNumber(string(x))
		if m := p.magnitude(); !ok || m > maxNumberExponent || m < -maxNumberExponent {
			return x, true
		}
	case map[string]any:
		for k, c := range x {
			if n, bad := findUnreadable(c, toks); bad {
				*toks = append(*toks, k)
				return n, true
			}
		}
	case []any:
		for i, c := range x {
			if n, bad := findUnreadable(c, toks); bad {
				*toks = append(*toks, strconv.Itoa(i))
				return n, true
			}
		}
	}
	return "", false
}

func unreadable(at string, n json.Number) []toolplane.Violation {
	return []toolplane.Violation{{
		FieldPath:    at,
		Constraint:   "number",
		Message:      fmt.Sprintf("%s: %s is outside the numbers toolplane reads (at most %d characters, magnitude within 1e±%d)", fieldName(at), show(n), maxNumberLength, maxNumberExponent),
		SuggestedFix: "send the number in plain digits, within the range the field describes",
	}}
}
