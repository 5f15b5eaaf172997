package compat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
)

// Sentinel errors of Check, for callers that branch with errors.Is.
var (
	// ErrInvalidVersion reports a version that is not MAJOR.MINOR.PATCH
	// with an optional -prerelease and +build.
	ErrInvalidVersion = errors.New("invalid semantic version")
	// ErrVersionNotGreater reports a new version that does not come after
	// the old one. A published version is immutable, so republishing it, or
	// publishing below it, is refused whatever changed.
	ErrVersionNotGreater = errors.New("version is not greater than the published one")
)

// version is a parsed semantic version (semver.org 2.0.0). The few lines
// here stand in for a dependency the module does not otherwise need.
type version struct {
	major, minor, patch uint64
	pre                 []string
}

func parseVersion(s string) (version, error) {
	var v version
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		if err := identifiers(rest[i+1:], false); err != nil {
			return v, fmt.Errorf("%w: %q: build %v", ErrInvalidVersion, s, err)
		}
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		if err := identifiers(rest[i+1:], true); err != nil {
			return v, fmt.Errorf("%w: %q: prerelease %v", ErrInvalidVersion, s, err)
		}
		v.pre = strings.Split(rest[i+1:], ".")
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("%w: %q: use MAJOR.MINOR.PATCH, such as 2.1.0", ErrInvalidVersion, s)
	}
	nums := [3]*uint64{&v.major, &v.minor, &v.patch}
	for i, p := range parts {
		n, err := numeric(p)
		if err != nil {
			return v, fmt.Errorf("%w: %q: %v", ErrInvalidVersion, s, err)
		}
		*nums[i] = n
	}
	return v, nil
}

// numeric reads a version number: digits, no leading zero.
func numeric(p string) (uint64, error) {
	if p == "" || strings.Trim(p, "0123456789") != "" {
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

// identifiers checks dot-separated [0-9A-Za-z-] identifiers; in a
// prerelease a numeric identifier may not have a leading zero.
func identifiers(s string, pre bool) error {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return errors.New("has an empty identifier")
		}
		digits := true
		for _, r := range id {
			switch {
			case r >= '0' && r <= '9':
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-':
				digits = false
			default:
				return fmt.Errorf("%q has a character other than letters, digits and '-'", id)
			}
		}
		if pre && digits && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("%q has a leading zero", id)
		}
	}
	return nil
}

// compare orders versions by semver precedence; build metadata does not
// count, so 1.0.0+a and 1.0.0+b are the same version.
func (v version) compare(w version) int {
	for _, c := range [][2]uint64{{v.major, w.major}, {v.minor, w.minor}, {v.patch, w.patch}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(v.pre) == 0 && len(w.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1
	case len(w.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(w.pre); i++ {
		if c := comparePre(v.pre[i], w.pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.pre) < len(w.pre):
		return -1
	case len(v.pre) > len(w.pre):
		return 1
	}
	return 0
}

func comparePre(a, b string) int {
	an, aErr := strconv.ParseUint(a, 10, 64)
	bn, bErr := strconv.ParseUint(b, 10, 64)
	aNum := aErr == nil || strings.Trim(a, "0123456789") == ""
	bNum := bErr == nil || strings.Trim(b, "0123456789") == ""
	switch {
	case aNum && bNum:
		if aErr != nil || bErr != nil {
			// Too large for uint64: the longer digit string is larger.
			if len(a) != len(b) {
				return cmpInt(len(a), len(b))
			}
			return strings.Compare(a, b)
		}
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		}
		return 0
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// declared answers the bump going from v to w declares; w must come after
// v. Between two versions of the same MAJOR.MINOR.PATCH (a prerelease to a
// later prerelease, or to its release) the triple itself is the one being
// drafted, so its shape decides: prereleases of 3.0.0 may change anything,
// those of 2.4.0 only compatibly, those of 2.4.1 only documentation.
func declared(v, w version) Bump {
	switch {
	case w.major != v.major:
		return Major
	case w.minor != v.minor:
		return Minor
	case w.patch != v.patch:
		return Patch
	}
	switch {
	case w.minor == 0 && w.patch == 0:
		return Major
	case w.patch == 0:
		return Minor
	}
	return Patch
}

// next answers the smallest release after v that declares bump b, the
// version a refused publisher can use instead.
func (v version) next(b Bump) string {
	if len(v.pre) > 0 {
		release := version{major: v.major, minor: v.minor, patch: v.patch}
		if declared(v, release) >= b {
			return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
		}
	}
	switch b {
	case Major:
		return fmt.Sprintf("%d.0.0", v.major+1)
	case Minor:
		return fmt.Sprintf("%d.%d.0", v.major, v.minor+1)
	}
	return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch+1)
}

// Violation is a publish the gate refuses: the version bump declared is
// smaller than what the changes need. It lists each change that needs
// more, so a publisher can either bump to Suggested or revert them.
type Violation struct {
	Tool string `json:"tool"`
	// From and To are the published and the proposed version.
	From string `json:"from"`
	To   string `json:"to"`
	// Declared is the bump From to To declares; Required what the changes
	// need.
	Declared Bump `json:"declared"`
	Required Bump `json:"required"`
	// Changes are the changes that need more than Declared.
	Changes []Change `json:"changes"`
	// Suggested is the smallest version after From that the gate would
	// accept for these changes.
	Suggested string `json:"suggested"`
}

// Error lists the offending changes one a line, each with the bump it
// needs, and ends with the version that would be accepted.
func (v *Violation) Error() string {
	var b strings.Builder
	need := v.Required.String()
	for _, c := range v.Changes {
		if c.Bump != v.Required {
			need = "more, up to " + need
			break
		}
	}
	fmt.Fprintf(&b, "%s %s → %s declares a %s bump, but %d change(s) need %s:", v.Tool, v.From, v.To, v.Declared, len(v.Changes), need)
	for _, c := range v.Changes {
		fmt.Fprintf(&b, "\n  %s (declared %s)", c, v.Declared)
	}
	fmt.Fprintf(&b, "\npublish as %s, or revert these changes", v.Suggested)
	return b.String()
}

// Check is the publish gate: it refuses next unless its version comes after
// prev's and declares a bump at least as large as every change between
// them needs. A refusal for changes is a *Violation; a refusal for the
// versions themselves wraps ErrInvalidVersion or ErrVersionNotGreater.
//
// A MAJOR bump is always accepted: the new major is a new registry entry
// that coexists with the old one, so nothing is compared against it.
func Check(prev, next *toolplane.Definition) error {
	if prev == nil || next == nil {
		return errors.New("compat: check: both the published and the new definition are needed")
	}
	pv, err := parseVersion(prev.Version)
	if err != nil {
		return fmt.Errorf("compat: check %s: published version: %w", prev.Name, err)
	}
	nv, err := parseVersion(next.Version)
	if err != nil {
		return fmt.Errorf("compat: check %s: new version: %w", next.Name, err)
	}
	if nv.compare(pv) <= 0 {
		return fmt.Errorf("compat: check %s: %w: %s does not come after %s; publish a higher version", next.Name, ErrVersionNotGreater, next.Version, prev.Version)
	}
	bump := declared(pv, nv)
	rep, err := classify(prev, next)
	if err != nil {
		return fmt.Errorf("compat: check %s: %w", next.Name, err)
	}
	if rep.Required <= bump {
		return nil
	}
	v := &Violation{Tool: next.Name, From: prev.Version, To: next.Version, Declared: bump, Required: rep.Required, Suggested: pv.next(rep.Required)}
	for _, c := range rep.Changes {
		if c.Bump > bump {
			v.Changes = append(v.Changes, c)
		}
	}
	return v
}
