// Package modelname derives the names models call tools by. Platform names
// keep their dot (payments.refund_order) everywhere they are stored; model
// providers accept only 1–64 ASCII letters, digits, underscores and hyphens
// in a function name, so the model sees a derived name (payments_refund_order)
// and a Map turns it back.
//
// The derivation replaces characters and never removes or truncates any, so
// it is lossy: crm.search_people and crm_search.people both derive
// crm_search_people. A Map therefore refuses collisions and over-long names
// instead of repairing them: a truncated or renamed tool would let the model's
// call reach the wrong handler.
package modelname

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MaxLength is the lowest function-name cap a supported provider documents.
const MaxLength = 64

// Sentinel errors a Map refuses names with.
var (
	ErrCollision = errors.New("model-facing name collision")
	ErrTooLong   = errors.New("model-facing name too long")
	ErrEmpty     = errors.New("empty tool name")
	ErrDuplicate = errors.New("duplicate platform name")
)

// Derive answers the model-facing name of a platform name: every character
// outside [A-Za-z0-9_-] becomes an underscore, one for one (a multi-byte
// character becomes one underscore).
func Derive(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if Allowed(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Allowed reports whether r may appear in a model-facing name.
func Allowed(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// Valid reports whether s fits the providers' shared grammar.
func Valid(s string) bool {
	if s == "" || len(s) > MaxLength {
		return false
	}
	for _, r := range s {
		if !Allowed(r) {
			return false
		}
	}
	return true
}

// Map is a checked, two-way mapping between platform names and model-facing
// names. The zero value is not usable; build one with New.
type Map struct {
	toModel    map[string]string
	toPlatform map[string]string
}

// Error reports every name a Map refused.
type Error struct {
	Refused []Refusal
}

// Refusal is one refused name and why, as an error of one of the
// sentinel kinds. It is not a toolplane.Problem: a name is refused by
// what the other names derive, and the registry, which knows the
// definition, words the problem and its fix.
type Refusal struct {
	Platform string // the platform name refused
	Model    string // its derived name
	Other    string // for a collision, the platform name it collides with
	Err      error  // ErrCollision, ErrTooLong, ErrEmpty or ErrDuplicate
}

func (p Refusal) Error() string {
	switch {
	case errors.Is(p.Err, ErrCollision):
		return fmt.Sprintf("%s: derives %q, which %s also derives; rename one of them (names are never truncated or suffixed)", p.Platform, p.Model, p.Other)
	case errors.Is(p.Err, ErrTooLong):
		return fmt.Sprintf("%s: derives %q, %d characters over the %d-character limit; shorten the name", p.Platform, p.Model, len(p.Model)-MaxLength, MaxLength)
	case errors.Is(p.Err, ErrDuplicate):
		return fmt.Sprintf("%s: listed twice", p.Platform)
	}
	return fmt.Sprintf("%q: %v", p.Platform, p.Err)
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Refused))
	for i, p := range e.Refused {
		parts[i] = p.Error()
	}
	return strings.Join(parts, "; ")
}

// Is lets errors.Is find the kind of any refused name.
func (e *Error) Is(target error) bool {
	for _, p := range e.Refused {
		if errors.Is(p.Err, target) {
			return true
		}
	}
	return false
}

// New builds a Map over platform names, refusing (with every problem listed,
// in name order) an empty name, a duplicate, a derived name over MaxLength,
// and two names that derive the same model-facing name.
func New(names []string) (*Map, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	m := &Map{toModel: make(map[string]string, len(names)), toPlatform: make(map[string]string, len(names))}
	var refused []Refusal
	for i, n := range sorted {
		d := Derive(n)
		switch {
		case n == "":
			refused = append(refused, Refusal{Platform: n, Err: ErrEmpty})
		case i > 0 && sorted[i-1] == n:
			refused = append(refused, Refusal{Platform: n, Model: d, Err: ErrDuplicate})
		case len(d) > MaxLength:
			refused = append(refused, Refusal{Platform: n, Model: d, Err: ErrTooLong})
		default:
			if other, taken := m.toPlatform[d]; taken {
				refused = append(refused, Refusal{Platform: n, Model: d, Other: other, Err: ErrCollision})
				continue
			}
			m.toModel[n] = d
			m.toPlatform[d] = n
		}
	}
	if refused != nil {
		return nil, &Error{Refused: refused}
	}
	return m, nil
}

// Model answers the model-facing name of a platform name in the map.
func (m *Map) Model(platform string) (string, bool) {
	d, ok := m.toModel[platform]
	return d, ok
}

// Platform answers the platform name a model-facing name stands for. A name
// the map does not hold answers false: it is never guessed back by
// replacing underscores, because the derivation cannot be inverted.
func (m *Map) Platform(model string) (string, bool) {
	p, ok := m.toPlatform[model]
	return p, ok
}

// Len answers how many names the map holds.
func (m *Map) Len() int { return len(m.toModel) }
