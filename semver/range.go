package semver

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidRange reports a string that is not a version range; errors
// from ParseRange wrap it, and also ErrInvalid when the version inside the
// range is what is wrong.
var ErrInvalidRange = errors.New("invalid version range")

// op is a range's operator. The zero op is "any", so that the zero Range
// contains every release, as an unpinned reference does.
type op uint8

const (
	opAny op = iota
	opExact
	opCaret
	opTilde
)

// Range is a set of versions a reference is pinned to, with npm and Cargo
// semantics:
//
//	2.1.0, =2.1.0  exactly 2.1.0 (build metadata aside)
//	^2.1.0         >=2.1.0 <3.0.0: the changes MAJOR 2 promises to keep
//	^0.2.3         >=0.2.3 <0.3.0: below 1.0.0, MINOR is the breaking digit
//	^0.0.3         >=0.0.3 <0.0.4: and below 0.1.0, PATCH is
//	~2.1.0         >=2.1.0 <2.2.0: patches only
//	*, ""          any release
//
// A prerelease is contained only when the range's own version is a
// prerelease of the same MAJOR.MINOR.PATCH (the npm rule): ^2.2.0-rc.1
// contains 2.2.0-rc.2 and 2.2.5, but not 2.3.0-rc.1, and ^2.1.0 contains no
// prerelease at all. Without the rule, a caller pinned to ^2.1.0 would be
// handed the first 3.0.0-rc.1 (it is below 3.0.0) or a 2.5.0-beta its
// publisher has not released yet; opting into drafts has to be explicit,
// and it covers only the drafts of the version named.
//
// The zero Range is "*".
type Range struct {
	op   op
	base Version
}

// ParseRange reads a range in one of the forms Range lists. Comparison
// operators (>=, <), compound ranges, partial versions (^2, 2.x) and build
// metadata are refused: build metadata does not order versions, so a range
// that names it would seem to select a build it cannot select.
func ParseRange(s string) (Range, error) {
	r, err := parseRange(s)
	if err != nil {
		return Range{}, fmt.Errorf("semver: parse range %q: %w", s, err)
	}
	return r, nil
}

func parseRange(s string) (Range, error) {
	if s == "" || s == "*" {
		return Range{}, nil
	}
	var r Range
	text := s
	switch s[0] {
	case '^':
		r.op, text = opCaret, s[1:]
	case '~':
		r.op, text = opTilde, s[1:]
	case '=':
		r.op, text = opExact, s[1:]
	case '>', '<', '!':
		return r, fmt.Errorf("%w: comparison operators are not supported; use 2.1.0, ^2.1.0 or ~2.1.0", ErrInvalidRange)
	default:
		r.op = opExact
	}
	if strings.ContainsAny(text, "|,") {
		return r, fmt.Errorf("%w: a range names one version; use 2.1.0, ^2.1.0 or ~2.1.0", ErrInvalidRange)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return r, fmt.Errorf("%w: a range holds no spaces; write ^2.1.0", ErrInvalidRange)
	}
	v, err := parse(text)
	if err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalidRange, err)
	}
	if len(v.build) > 0 {
		return r, fmt.Errorf("%w: build metadata does not select versions; drop %q", ErrInvalidRange, "+"+strings.Join(v.build, "."))
	}
	r.base = v
	return r, nil
}

// Contains reports whether v is in the range, under the prerelease rule
// Range describes.
func (r Range) Contains(v Version) bool {
	b := r.base
	if len(v.pre) > 0 && (len(b.pre) == 0 || v.major != b.major || v.minor != b.minor || v.patch != b.patch) {
		return false
	}
	switch r.op {
	case opAny:
		return true
	case opExact:
		return Compare(v, b) == 0
	}
	if Compare(v, b) < 0 {
		return false
	}
	// The upper bounds are checked as "the same leading numbers" rather
	// than as "below base with one number raised", which would overflow
	// at the largest MAJOR or MINOR.
	if r.op == opTilde {
		return v.major == b.major && v.minor == b.minor
	}
	switch {
	case b.major > 0:
		return v.major == b.major
	case b.minor > 0:
		return v.major == 0 && v.minor == b.minor
	}
	return v.major == 0 && v.minor == 0 && v.patch == b.patch
}

// String answers the range in its canonical form, which ParseRange reads
// back as the same range: "*" for any, the bare version for an exact
// range (=2.1.0 becomes 2.1.0), and ^ or ~ before the version otherwise.
func (r Range) String() string {
	switch r.op {
	case opCaret:
		return "^" + r.base.String()
	case opTilde:
		return "~" + r.base.String()
	case opExact:
		return r.base.String()
	}
	return "*"
}

// SplitRef splits a tool reference ("payments.refund_order@^2.1.0") into
// the name and the range text, which is "" when the reference has no '@'
// (ParseRange reads "" as any version). It splits at the first '@': tool
// names cannot hold one, so a second '@' lands in the range text, where
// ParseRange refuses it, rather than in a name that might match nothing
// without complaint.
func SplitRef(ref string) (name, rangeText string) {
	name, rangeText, _ = strings.Cut(ref, "@")
	return name, rangeText
}
