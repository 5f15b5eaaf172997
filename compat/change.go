// Package compat is the compatibility gate for publishing a new version of a
// tool definition. It diffs the old and new definitions structurally (input,
// output and error schemas keyword by keyword, plus the definition's
// behavioural metadata), says which semantic-version bump each difference
// needs, and refuses a publish whose declared bump is smaller than that.
//
// The gate exists because agents pin a version range (^2.1.0) and receive
// every MINOR and PATCH publish without being redeployed: a breaking change
// shipped as a MINOR reaches every pinned caller at once. So every judgement
// here errs towards MAJOR when it cannot prove a change safe, and says why in
// the change's Detail, so that a publisher who disagrees can see what the
// gate could not decide.
//
// Direction matters. An input schema is a promise about what the tool
// accepts: accepting more is compatible, accepting less breaks a caller whose
// value used to be valid. An output schema is a promise about what the tool
// returns: returning less (or more precisely) is compatible, returning values
// outside the promise breaks a consumer that relied on it.
package compat

import (
	"fmt"
	"strings"
)

// Bump is a semantic-version increment. The order matters: a change needing
// a Bump is allowed by any declared Bump at least as large.
type Bump int

// The bumps, smallest first.
const (
	// Patch allows only documentation and non-behavioural metadata changes.
	Patch Bump = iota
	// Minor allows backward-compatible schema and behaviour changes.
	Minor
	// Major allows anything: the new major coexists with the old one.
	Major
)

// String answers PATCH, MINOR or MAJOR, the spelling publishers see.
func (b Bump) String() string {
	switch b {
	case Patch:
		return "PATCH"
	case Minor:
		return "MINOR"
	case Major:
		return "MAJOR"
	}
	return fmt.Sprintf("Bump(%d)", int(b))
}

// MarshalText writes the bump as String does, so reports read the same in
// JSON as in messages.
func (b Bump) MarshalText() ([]byte, error) {
	if b < Patch || b > Major {
		return nil, fmt.Errorf("compat: bump %d is out of range", int(b))
	}
	return []byte(b.String()), nil
}

// UnmarshalText reads PATCH, MINOR or MAJOR in any letter case.
func (b *Bump) UnmarshalText(text []byte) error {
	switch strings.ToUpper(string(text)) {
	case "PATCH":
		*b = Patch
	case "MINOR":
		*b = Minor
	case "MAJOR":
		*b = Major
	default:
		return fmt.Errorf("compat: %q is not a bump; use PATCH, MINOR or MAJOR", text)
	}
	return nil
}

// Side says which part of a definition a change concerns. Input and output
// are judged in opposite directions; error schemas are judged like outputs,
// because a caller reads the errors a tool answers.
type Side string

// The sides.
const (
	SideInput      Side = "input"
	SideOutput     Side = "output"
	SideError      Side = "error"
	SideDefinition Side = "definition"
)

// Kind names what changed. The same kind can need different bumps on
// different sides: a new required field breaks callers of an input but not
// consumers of an output.
type Kind string

// The kinds of change.
const (
	// A property declared only in the new schema and not required.
	KindFieldAddedOptional Kind = "field_added_optional"
	// A property declared only in the new schema and required.
	KindFieldAddedRequired Kind = "field_added_required"
	// A property declared only in the old schema. A rename is a removal
	// plus an addition: nothing in a schema says two names are one field.
	KindFieldRemoved Kind = "field_removed"
	// A field that exists on both sides became required.
	KindRequiredAdded Kind = "required_added"
	// A field that exists on both sides is no longer required.
	KindRequiredRemoved Kind = "required_removed"
	// The type keyword changed in any way, including integer to number.
	KindTypeChanged Kind = "type_changed"
	// A constraint now accepts more values.
	KindConstraintWidened Kind = "constraint_widened"
	// A constraint now accepts fewer values.
	KindConstraintNarrowed Kind = "constraint_narrowed"
	// A constraint changed in a way that is neither provably wider nor
	// provably narrower (a new regular expression, a new oneOf branch).
	KindConstraintChanged Kind = "constraint_changed"
	// An enum (or const) accepts values it did not.
	KindEnumValuesAdded Kind = "enum_values_added"
	// An enum (or const) no longer accepts some values.
	KindEnumValuesRemoved Kind = "enum_values_removed"
	// title, description, examples or $comment changed.
	KindDescriptionChanged Kind = "description_changed"
	// Another annotation changed: deprecated, readOnly, content*, $id.
	KindAnnotationChanged Kind = "annotation_changed"
	// A documented default changed.
	KindDefaultChanged Kind = "default_changed"
	// A keyword or value the gate cannot interpret changed.
	KindUnclassified Kind = "unclassified"
	// Definition metadata that does not change behaviour changed.
	KindMetadataChanged Kind = "metadata_changed"
	// Definition metadata that changes how a call behaves changed.
	KindBehaviourChanged Kind = "behaviour_changed"
)

// Change is one difference between two versions and the bump it needs.
type Change struct {
	Side Side `json:"side"`
	// Path is the field as a caller names it: amount, customer.id,
	// items[].sku, labels.* for any additional field, labels.<key> for the
	// field names themselves; "" is the root. For SideDefinition it is the
	// definition field (annotations.destructive).
	Path string `json:"path"`
	// Pointer is the JSON pointer of the schema keyword in the new
	// document, or in the old one when the keyword is gone, so an author can
	// find the line. It follows $ref, so it may point into $defs.
	Pointer string `json:"pointer,omitempty"`
	Kind    Kind   `json:"kind"`
	Detail  string `json:"detail"`
	Bump    Bump   `json:"bump"`
}

// String renders the change as a publisher reads it, for example
// "input amount: added as required — needs MAJOR".
func (c Change) String() string {
	return fmt.Sprintf("%s %s: %s — needs %s", c.Side, displayPath(c.Path), c.Detail, c.Bump)
}

func displayPath(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// maxBump answers the largest bump any change needs; Patch when none.
func maxBump(cs []Change) Bump {
	b := Patch
	for _, c := range cs {
		b = max(b, c.Bump)
	}
	return b
}
