package registry

import (
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/modelname"
	"github.com/toolplane/toolplane/semver"
)

// ReplacementRef answers what a deprecated version's callers should move
// to, as a tool's platform name and a version range ("" for any version);
// name is "" when the version names no replacement or is not deprecated.
func (t *Tool) ReplacementRef() (name, rng string) {
	if t.State != toolplane.StateDeprecated || t.Replacement == "" {
		return "", ""
	}
	return semver.SplitRef(t.Replacement)
}

// DeprecationWarning answers the warning a call of a deprecated version
// carries, in platform names ("" for a version that is not deprecated):
// the version, its earliest retirement and its replacement.
func (t *Tool) DeprecationWarning() string {
	if t.State != toolplane.StateDeprecated {
		return ""
	}
	w := fmt.Sprintf("%s %s is deprecated", t.Def.Name, t.Def.Version)
	if !t.SunsetAt.IsZero() {
		w += " and may be retired from " + t.SunsetAt.UTC().Format(time.DateOnly)
	}
	if t.Replacement != "" {
		w += "; move to " + t.Replacement
	}
	return w
}

// ModelDescription answers the description a model is shown for the tool:
// the definition's, and for a deprecated version a last line saying so,
// with its earliest retirement and, by its model-facing name, the tool
// that replaces it. Only the platform's own facts are added (the
// replacement is a name the registry checked, the sunset a date); the
// owner's free-text note on the deprecation is for people and never
// reaches a model unreviewed.
func (t *Tool) ModelDescription() string { return t.ModelDescriptionFor(nil) }

// ModelDescriptionFor is ModelDescription for a caller shown only the
// tools shown reports (nil: every tool): a replacement the caller may not
// call is not named, as search and the dependency graph name none.
func (t *Tool) ModelDescriptionFor(shown func(name string) bool) string {
	if t.State != toolplane.StateDeprecated {
		return t.Def.Description
	}
	line := "Deprecated"
	if !t.SunsetAt.IsZero() {
		line += ": it may be retired from " + t.SunsetAt.UTC().Format(time.DateOnly)
	}
	switch name, rng := t.ReplacementRef(); {
	case name == "":
	case name != t.Def.Name && shown != nil && !shown(name):
	case name == t.Def.Name && rng == "":
		line += "; another version of this tool replaces it"
	case name == t.Def.Name:
		line += fmt.Sprintf("; version %s of this tool replaces it", rng)
	default:
		line += fmt.Sprintf("; use %s instead", modelname.Derive(name))
	}
	line += "."
	if t.Def.Description == "" {
		return line
	}
	return t.Def.Description + "\n\n" + line
}
