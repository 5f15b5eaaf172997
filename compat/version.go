package compat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/semver"
)

// Sentinel errors of Check, for callers that branch with errors.Is.
var (
	// ErrInvalidVersion reports a version that is not MAJOR.MINOR.PATCH
	// with an optional -prerelease and +build. It is semver.ErrInvalid, so
	// that one errors.Is test covers versions refused here and anywhere
	// else they are parsed.
	ErrInvalidVersion = semver.ErrInvalid
	// ErrVersionNotGreater reports a new version that does not come after
	// the old one. A published version is immutable, so republishing it, or
	// publishing below it, is refused whatever changed.
	ErrVersionNotGreater = errors.New("version is not greater than the published one")
)

// declared answers the bump going from v to w declares; w must come after
// v. Between two versions of the same MAJOR.MINOR.PATCH (a prerelease to a
// later prerelease, or to its release) the triple itself is the one being
// drafted, so its shape decides: prereleases of 3.0.0 may change anything,
// those of 2.4.0 only compatibly, those of 2.4.1 only documentation.
//
// This is the gate's reading of a version pair, not semver precedence,
// which is why it lives here rather than in package semver.
func declared(v, w semver.Version) Bump {
	switch {
	case w.Major() != v.Major():
		return Major
	case w.Minor() != v.Minor():
		return Minor
	case w.Patch() != v.Patch():
		return Patch
	}
	return drafted(w)
}

// drafted answers the bump the MAJOR.MINOR.PATCH of v declares when it is
// the version being drafted: x.0.0 a MAJOR, x.y.0 a MINOR, x.y.z a PATCH.
func drafted(v semver.Version) Bump {
	switch {
	case v.Minor() == 0 && v.Patch() == 0:
		return Major
	case v.Patch() == 0:
		return Minor
	}
	return Patch
}

// suggest answers the smallest release after v that declares bump b, the
// version a refused publisher can use instead.
func suggest(v semver.Version, b Bump) string {
	// A prerelease's own release comes right after it; it is enough when
	// its shape declares b, as declared(v, release) would answer.
	if len(v.Prerelease()) > 0 && drafted(v) >= b {
		return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
	}
	switch b {
	case Major:
		return fmt.Sprintf("%d.0.0", v.Major()+1)
	case Minor:
		return fmt.Sprintf("%d.%d.0", v.Major(), v.Minor()+1)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch()+1)
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
	rep, err := Classify(prev, next)
	if err != nil {
		return err
	}
	return Gate(prev, next, rep)
}

// Gate is Check's verdict on a report Classify already made of prev and
// next: a caller that shows the changes as well needs no second diff.
func Gate(prev, next *toolplane.Definition, rep Report) error {
	pv, err := semver.Parse(prev.Version)
	if err != nil {
		return fmt.Errorf("compat: check %s: published version: %w", prev.Name, err)
	}
	nv, err := semver.Parse(next.Version)
	if err != nil {
		return fmt.Errorf("compat: check %s: new version: %w", next.Name, err)
	}
	if semver.Compare(nv, pv) <= 0 {
		return fmt.Errorf("compat: check %s: %w: %s does not come after %s; publish a higher version", next.Name, ErrVersionNotGreater, next.Version, prev.Version)
	}
	bump := declared(pv, nv)
	if rep.Required <= bump {
		return nil
	}
	v := &Violation{Tool: next.Name, From: prev.Version, To: next.Version, Declared: bump, Required: rep.Required, Suggested: suggest(pv, rep.Required)}
	for _, c := range rep.Changes {
		if c.Bump > bump {
			v.Changes = append(v.Changes, c)
		}
	}
	return v
}
