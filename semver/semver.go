// Package semver parses, orders and matches the semantic versions
// (semver.org 2.0.0) that tool definitions are published under, and the
// version ranges ("^2.1.0") that grants and bundles pin tools to.
//
// Parsing is strict: a version has exactly one spelling, so the string a
// publisher wrote, the one stored and the one shown back are the same, and
// two spellings can never name one version.
package semver

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid reports a string that is not a semantic version; errors from
// Parse wrap it, so callers can branch with errors.Is whatever the detail.
var ErrInvalid = errors.New("invalid semantic version")

// Version is a semantic version: MAJOR.MINOR.PATCH with optional
// prerelease and build identifiers.
//
// Its fields are unexported so that every Version is one Parse accepted
// (or the zero value, 0.0.0): String then always answers a string Parse
// takes back, and Compare may rely on numeric identifiers having no
// leading zero.
type Version struct {
	major, minor, patch uint64
	pre, build          []string
}

// Parse reads a strict semantic version, such as 2.1.0, 2.2.0-rc.1 or
// 2.1.0+build.5. A leading "v" is refused rather than dropped: tool
// versions are written without it, and accepting it would give a version
// two spellings.
func Parse(s string) (Version, error) {
	v, err := parse(s)
	if err != nil {
		return Version{}, fmt.Errorf("semver: parse %q: %w", s, err)
	}
	return v, nil
}

// parse answers errors without the input, so that Parse and ParseRange can
// each say which string they were reading.
func parse(s string) (Version, error) {
	var v Version
	if s == "" {
		return v, fmt.Errorf("%w: empty; use MAJOR.MINOR.PATCH, such as 2.1.0", ErrInvalid)
	}
	if s[0] == 'v' || s[0] == 'V' {
		return v, fmt.Errorf("%w: drop the leading %q; tool versions are written like 2.1.0", ErrInvalid, s[0])
	}
	rest := s
	// Build metadata comes last and cannot hold '+', and a prerelease
	// cannot either, so the first '+' is where build metadata starts.
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		ids, err := identifiers(rest[i+1:], false)
		if err != nil {
			return v, fmt.Errorf("%w: build metadata: %w", ErrInvalid, err)
		}
		v.build, rest = ids, rest[:i]
	}
	// The core holds only digits and dots, so the first '-' starts the
	// prerelease even though the prerelease may contain more of them.
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		ids, err := identifiers(rest[i+1:], true)
		if err != nil {
			return v, fmt.Errorf("%w: prerelease: %w", ErrInvalid, err)
		}
		v.pre, rest = ids, rest[:i]
	}
	if rest == "" {
		return v, fmt.Errorf("%w: MAJOR.MINOR.PATCH is missing; write it first, such as 2.1.0", ErrInvalid)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("%w: %q is not MAJOR.MINOR.PATCH, such as 2.1.0", ErrInvalid, rest)
	}
	names := [3]string{"major", "minor", "patch"}
	nums := [3]*uint64{&v.major, &v.minor, &v.patch}
	for i, p := range parts {
		n, err := number(p)
		if err != nil {
			return v, fmt.Errorf("%w: %s %w", ErrInvalid, names[i], err)
		}
		*nums[i] = n
	}
	return v, nil
}

// number reads a MAJOR, MINOR or PATCH field. A leading zero is refused
// because 2.01.0 and 2.1.0 would otherwise be two spellings of one
// version.
func number(p string) (uint64, error) {
	if p == "" || !digits(p) {
		return 0, fmt.Errorf("%q is not a number", p)
	}
	if len(p) > 1 && p[0] == '0' {
		return 0, fmt.Errorf("%q has a leading zero", p)
	}
	n, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is too large", p)
	}
	return n, nil
}

// identifiers splits dot-separated [0-9A-Za-z-] identifiers. Only a
// prerelease refuses leading zeros in numeric identifiers, since only
// there do they take part in ordering.
func identifiers(s string, pre bool) ([]string, error) {
	ids := strings.Split(s, ".")
	for _, id := range ids {
		if id == "" {
			return nil, errors.New("has an empty identifier")
		}
		for i := 0; i < len(id); i++ {
			if c := id[i]; !isDigit(c) && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && c != '-' {
				return nil, fmt.Errorf("%q has a character other than ASCII letters, digits and '-'", id)
			}
		}
		if pre && len(id) > 1 && id[0] == '0' && digits(id) {
			return nil, fmt.Errorf("%q has a leading zero", id)
		}
	}
	return ids, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// Major answers the MAJOR number.
func (v Version) Major() uint64 { return v.major }

// Minor answers the MINOR number.
func (v Version) Minor() uint64 { return v.minor }

// Patch answers the PATCH number.
func (v Version) Patch() uint64 { return v.patch }

// Prerelease answers the prerelease identifiers (["rc", "1"] for
// 2.2.0-rc.1), nil for a release. The slice is a copy, so a caller cannot
// change the Version through it.
func (v Version) Prerelease() []string { return slices.Clone(v.pre) }

// Build answers the build metadata identifiers, nil when there are none.
// The slice is a copy, so a caller cannot change the Version through it.
func (v Version) Build() []string { return slices.Clone(v.build) }

// String answers the version as Parse reads it; since Parse accepts one
// spelling only, that is the very string the version was parsed from.
func (v Version) String() string {
	b := make([]byte, 0, 16)
	b = strconv.AppendUint(b, v.major, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, v.minor, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, v.patch, 10)
	if len(v.pre) > 0 {
		b = append(b, '-')
		b = append(b, strings.Join(v.pre, ".")...)
	}
	if len(v.build) > 0 {
		b = append(b, '+')
		b = append(b, strings.Join(v.build, ".")...)
	}
	return string(b)
}

// Compare orders a and b by semver precedence: -1 when a comes before b,
// +1 when after, 0 when neither. Build metadata does not count, so
// 1.0.0+a and 1.0.0+b compare equal: they are one version built twice,
// and publishing one after the other is not an upgrade.
func Compare(a, b Version) int {
	if c := cmp.Compare(a.major, b.major); c != 0 {
		return c
	}
	if c := cmp.Compare(a.minor, b.minor); c != 0 {
		return c
	}
	if c := cmp.Compare(a.patch, b.patch); c != 0 {
		return c
	}
	// A prerelease is a draft of its release, so it comes before it.
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		if c := compareIdentifier(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a.pre), len(b.pre))
}

// compareIdentifier orders two prerelease identifiers. Numeric ones are
// compared by length first, which orders them by value without parsing:
// Parse refuses leading zeros, and a prerelease number may exceed uint64.
func compareIdentifier(a, b string) int {
	an, bn := digits(a), digits(b)
	switch {
	case an && bn:
		if len(a) != len(b) {
			return cmp.Compare(len(a), len(b))
		}
		return strings.Compare(a, b)
	case an:
		return -1
	case bn:
		return 1
	}
	return strings.Compare(a, b)
}
