package schema

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// The fast path. The reference validator is general and exact, and it
// spends most of a call on bookkeeping that a plain argument object never
// needs (evaluated-property tracking, arbitrary-precision numbers). Most
// tool schemas use a small set of keywords, so for those toolplane compiles
// a second, narrow checker that can only answer "valid" or "not sure". A
// call it vouches for is accepted at once; anything else, including every
// invalid call, goes to the reference validator, which alone writes
// violations. Its soundness (never "valid" where the reference says
// invalid) is checked by a differential fuzz test.

type fastNode struct {
	types      typeSet
	props      map[string]*fastNode
	required   []string
	closed     bool      // additionalProperties: false
	additional *fastNode // additionalProperties: {schema}
	items      *fastNode
	minItems   int
	maxItems   int // -1: none
	minLength  int
	maxLength  int // -1: none
	pattern    *regexp.Regexp
	program    int64 // the pattern's instructions: its cost per input byte
	enum       []any
	hasEnum    bool
	min, max   *float64
	exMin      *float64
	exMax      *float64
}

// annotation keywords carry no assertion; the fast path may ignore them.
var annotations = map[string]bool{
	"$schema": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true,
	"writeOnly": true, "$id": true,
}

// compileFast builds the narrow checker, or nil when the schema uses any
// keyword it does not handle.
func compileFast(v any, progs map[string]int64) *fastNode {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	n := &fastNode{maxItems: -1, maxLength: -1}
	for k, val := range m {
		if annotations[k] || len(k) > 2 && k[:2] == "x-" {
			continue
		}
		switch k {
		case "type":
			switch t := val.(type) {
			case string:
				n.types = typeBits[t]
			case []any:
				for _, x := range t {
					s, _ := x.(string)
					n.types |= typeBits[s]
				}
			}
			if n.types == 0 {
				return nil
			}
		case "properties":
			p, ok := val.(map[string]any)
			if !ok {
				return nil
			}
			n.props = make(map[string]*fastNode, len(p))
			for name, sub := range p {
				c := compileFast(sub, progs)
				if c == nil {
					return nil
				}
				n.props[name] = c
			}
		case "required":
			r, ok := val.([]any)
			if !ok {
				return nil
			}
			for _, x := range r {
				s, ok := x.(string)
				if !ok {
					return nil
				}
				n.required = append(n.required, s)
			}
		case "additionalProperties":
			switch a := val.(type) {
			case bool:
				n.closed = !a
			default:
				if n.additional = compileFast(a, progs); n.additional == nil {
					return nil
				}
			}
		case "items":
			if n.items = compileFast(val, progs); n.items == nil {
				return nil
			}
		case "minItems", "maxItems", "minLength", "maxLength":
			i, ok := count(val)
			if !ok {
				return nil
			}
			switch k {
			case "minItems":
				n.minItems = i
			case "maxItems":
				n.maxItems = i
			case "minLength":
				n.minLength = i
			case "maxLength":
				n.maxLength = i
			}
		case "pattern":
			s, ok := val.(string)
			if !ok {
				return nil
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil
			}
			n.pattern, n.program = re, progs[s]
		case "enum":
			e, ok := val.([]any)
			if !ok {
				return nil
			}
			for _, x := range e {
				switch x.(type) {
				case string, bool, nil:
				default:
					return nil // numbers and containers: equality is the reference's job
				}
			}
			n.enum, n.hasEnum = e, true
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			f, ok := bound(val)
			if !ok {
				return nil
			}
			switch k {
			case "minimum":
				n.min = &f
			case "maximum":
				n.max = &f
			case "exclusiveMinimum":
				n.exMin = &f
			case "exclusiveMaximum":
				n.exMax = &f
			}
		default:
			return nil
		}
	}
	return n
}

func count(v any) (int, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(string(num))
	return i, err == nil && i >= 0
}

// bound reads a numeric keyword that float64 holds exactly, so comparing
// against it loses nothing.
func bound(v any) (float64, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	if strconv.FormatFloat(f, 'f', -1, 64) != string(num) {
		return 0, false
	}
	return f, true
}

// valid reports true only when v certainly satisfies n.
func (n *fastNode) valid(v any) bool {
	budget := int64(math.MaxInt64)
	return n.within(v, &budget)
}

// within is valid with a budget of regular-expression steps (input bytes
// times program instructions, as the work estimate counts them): a pattern
// that would overdraw it is not run and v is left to the reference path,
// whose work estimate then refuses it. The fast path runs first, so without
// the budget it would be the unbounded step.
func (n *fastNode) within(v any, budget *int64) bool {
	switch x := v.(type) {
	case string:
		if n.types != 0 && n.types&tString == 0 {
			return false
		}
		if n.minLength > 0 || n.maxLength >= 0 {
			l := utf8.RuneCountInString(x)
			if l < n.minLength || n.maxLength >= 0 && l > n.maxLength {
				return false
			}
		}
		if n.pattern != nil {
			steps := mulCount(int64(len(x)), n.program)
			if steps > *budget {
				return false
			}
			*budget -= steps
			if !n.pattern.MatchString(x) {
				return false
			}
		}
		return n.inEnum(x)
	case json.Number:
		return n.number(x)
	case bool:
		return (n.types == 0 || n.types&tBoolean != 0) && n.inEnum(x)
	case nil:
		return (n.types == 0 || n.types&tNull != 0) && n.inEnum(nil)
	case map[string]any:
		if n.types != 0 && n.types&tObject == 0 || n.hasEnum {
			return false
		}
		for _, r := range n.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		for k, c := range x {
			cn, ok := n.props[k]
			if !ok {
				if n.closed {
					return false
				}
				cn = n.additional
			}
			if cn != nil && !cn.within(c, budget) {
				return false
			}
		}
		return true
	case []any:
		if n.types != 0 && n.types&tArray == 0 || n.hasEnum {
			return false
		}
		if len(x) < n.minItems || n.maxItems >= 0 && len(x) > n.maxItems {
			return false
		}
		if n.items != nil {
			for _, c := range x {
				if !n.items.within(c, budget) {
					return false
				}
			}
		}
		return true
	}
	return false
}

func (n *fastNode) inEnum(v any) bool {
	if !n.hasEnum {
		return true
	}
	for _, e := range n.enum {
		if e == v {
			return true
		}
	}
	return false
}

// number vouches for plainly written integers and decimals only; exponents
// and values float64 cannot compare soundly are left to the reference.
func (n *fastNode) number(x json.Number) bool {
	if n.hasEnum {
		return false
	}
	s := string(x)
	isInt := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			isInt = false
		case c == 'e' || c == 'E':
			return false
		}
	}
	switch {
	case n.types == 0:
	case isInt && n.types&(tInteger|tNumber) != 0:
	case !isInt && n.types&tNumber != 0:
	default:
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.Abs(f) > 1<<53 {
		return false
	}
	// Strict comparisons of rounded values are sound (rounding is
	// monotonic); an equal rounded value might be either side, so it is
	// left to the reference.
	if n.min != nil && !(f > *n.min) && !(isInt && f == *n.min) {
		return false
	}
	if n.max != nil && !(f < *n.max) && !(isInt && f == *n.max) {
		return false
	}
	if n.exMin != nil && !(f > *n.exMin) {
		return false
	}
	if n.exMax != nil && !(f < *n.exMax) {
		return false
	}
	return true
}
