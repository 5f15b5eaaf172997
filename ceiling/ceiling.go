// Package ceiling is the arithmetic of a vendor ceiling
// (toolplane.VendorCeiling): how many calls to one vendor account the
// lanes of the agent platform in front of toolplane can make at once, and
// whether that stays within the account's limit.
//
// It is a configuration review, not a limiter. toolplane runs no
// workflow, and a count of calls in flight shared by every node would be a
// second limiter that needs a shared store on the call path and leaks a
// slot whenever a worker dies holding it. Instead the operator declares
// each lane's active run limit and what one run of it does (its shape),
// and the sum
//
//	Σ lanes (active runs × most simultaneous calls to the vendor in one run)
//
// is checked against the account limit whenever either side changes: a
// ceiling whose sum exceeds its limit is refused, naming every lane's
// product, and nothing is stored. Short bursts the arithmetic admits are
// absorbed by the bounded retry of a refused call.
//
// The most simultaneous calls of one run are read from its shape: a call
// of the vendor contributes its fanout (a wide node's concurrency, 1 when
// not given), a sequence and a branch the largest of their parts (one part
// runs at a time), and a parallel the sum of its parts (they all run at
// once). A child run is not part of its parent's shape: it counts in its
// own lane, and its suspended parent holds no slot meanwhile.
package ceiling

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
)

// Bounds of a ceiling. They keep the arithmetic within int64 (at most
// MaxLanes × MaxActiveRuns × MaxNodes × MaxFanout, below 2^63) and a
// declaration small enough to read.
const (
	// MaxAccountLimit bounds a vendor account's limit.
	MaxAccountLimit = 1_000_000_000
	// MaxLanes bounds a ceiling's lanes.
	MaxLanes = 32
	// MaxActiveRuns bounds a lane's active run limit.
	MaxActiveRuns = 1_000_000
	// MaxFanout bounds one call node's fanout.
	MaxFanout = 10_000
	// MaxDepth bounds how deep a run shape nests (a lone call is 1).
	MaxDepth = 16
	// MaxNodes bounds the nodes of one run shape.
	MaxNodes = 256
	// MaxShapeText bounds a run shape's text form (Parse).
	MaxShapeText = 8 << 10
	// MaxNote bounds a ceiling's note, in bytes.
	MaxNote = 1024
)

// InvalidError is a ceiling refused for its form: Field names the part at
// fault as its JSON spells it (account_limit, lanes[1].shape.parts[0]),
// Why says what it must be. It is of kind toolplane.ErrInvalid.
type InvalidError struct {
	Field, Why string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Why }

// Unwrap answers toolplane.ErrInvalid, the kind of the error.
func (e *InvalidError) Unwrap() error { return toolplane.ErrInvalid }

// ExceededError is a ceiling refused for its arithmetic: its lanes can
// make more calls at once than the account accepts. Its message names
// every lane's product and the sum, so the operator sees which lane to
// narrow. It is of kind toolplane.ErrInvalid.
type ExceededError struct {
	Arithmetic Arithmetic
}

func (e *ExceededError) Error() string {
	return "the lanes can make more calls to " + e.Arithmetic.Provider + " at once than its account accepts: " + e.Arithmetic.String()
}

// Unwrap answers toolplane.ErrInvalid, the kind of the error.
func (e *ExceededError) Unwrap() error { return toolplane.ErrInvalid }

// Product is one lane's term of the sum.
type Product struct {
	Lane       string `json:"lane"`
	ActiveRuns int64  `json:"active_runs"`
	// Calls is the most simultaneous calls to the vendor one run of the
	// lane makes.
	Calls   int64 `json:"calls"`
	Product int64 `json:"product"`
}

// Arithmetic is a ceiling's sum, term by term.
type Arithmetic struct {
	Provider string    `json:"provider"`
	Lanes    []Product `json:"lanes"`
	// Sum is the most calls to the vendor the lanes make at once.
	Sum          int64 `json:"sum"`
	AccountLimit int64 `json:"account_limit"`
}

// Within reports whether the sum stays within the account limit.
func (a Arithmetic) Within() bool { return a.Sum <= a.AccountLimit }

// String answers the sum as a person checks it:
// "interactive: 20 runs × 6 calls = 120; batch: 5 runs × 10 calls = 50;
// sum 170 > account limit 100".
func (a Arithmetic) String() string {
	var b strings.Builder
	for _, p := range a.Lanes {
		fmt.Fprintf(&b, "%s: %d %s × %d %s = %d; ", p.Lane, p.ActiveRuns, plural(p.ActiveRuns, "run"), p.Calls, plural(p.Calls, "call"), p.Product)
	}
	op := "<="
	if !a.Within() {
		op = ">"
	}
	fmt.Fprintf(&b, "sum %d %s account limit %d", a.Sum, op, a.AccountLimit)
	return b.String()
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Calls answers the most simultaneous calls to provider one run of shape
// s makes: a call of provider its fanout (1 when 0), a sequence or branch
// the largest of its parts, a parallel the sum of its parts. Calls of
// another provider count nothing. s must have passed CheckShape, which
// bounds its depth and keeps the answer within int64.
func Calls(s toolplane.RunShape, provider string) int64 {
	switch s.Kind {
	case toolplane.ShapeCall:
		if s.Provider != provider {
			return 0
		}
		return max(s.Fanout, 1)
	case toolplane.ShapeParallel:
		var n int64
		for _, p := range s.Parts {
			n += Calls(p, provider)
		}
		return n
	default: // sequence, branch: one part at a time
		var n int64
		for _, p := range s.Parts {
			n = max(n, Calls(p, provider))
		}
		return n
	}
}

// Compute checks c's form and answers its arithmetic, within the limit
// or not: an *InvalidError for a ceiling out of form.
func Compute(c *toolplane.VendorCeiling) (Arithmetic, error) {
	if err := CheckForm(c); err != nil {
		return Arithmetic{}, err
	}
	a := Arithmetic{Provider: c.Provider, AccountLimit: c.AccountLimit, Lanes: make([]Product, 0, len(c.Lanes))}
	for _, l := range c.Lanes {
		calls := Calls(l.Shape, c.Provider)
		p := Product{Lane: l.Name, ActiveRuns: l.ActiveRuns, Calls: calls, Product: l.ActiveRuns * calls}
		a.Lanes = append(a.Lanes, p)
		a.Sum += p.Product
	}
	return a, nil
}

// Check answers c's arithmetic when c is in form and its sum stays within
// its account limit; an *InvalidError or an *ExceededError otherwise.
func Check(c *toolplane.VendorCeiling) (Arithmetic, error) {
	a, err := Compute(c)
	if err != nil {
		return a, err
	}
	if !a.Within() {
		return a, &ExceededError{Arithmetic: a}
	}
	return a, nil
}

// Warnings answers what an operator should be told of a ceiling without
// its being refused: a lane whose shape makes no call to the vendor adds
// nothing to the sum, which is right for a lane that never calls it and
// wrong for one whose calls name the vendor differently.
func Warnings(a Arithmetic) []string {
	var w []string
	for _, p := range a.Lanes {
		if p.Calls == 0 {
			w = append(w, fmt.Sprintf("lane %s makes no call to %s, so it adds nothing to the sum: check the provider its call nodes name", p.Lane, a.Provider))
		}
	}
	return w
}

// CheckForm checks c within its bounds: a provider and lane names of the
// connections' grammar, lane names unique, numbers positive and bounded,
// every shape well formed (CheckShape).
func CheckForm(c *toolplane.VendorCeiling) error {
	if err := checkProvider(c.Provider); err != nil {
		return err
	}
	if c.AccountLimit < 1 || c.AccountLimit > MaxAccountLimit {
		return &InvalidError{"account_limit", fmt.Sprintf("%d: want the calls the vendor account accepts at once, 1 to %d", c.AccountLimit, MaxAccountLimit)}
	}
	if len(c.Note) > MaxNote || !utf8.ValidString(c.Note) || strings.ContainsRune(c.Note, 0) {
		return &InvalidError{"note", fmt.Sprintf("want UTF-8 text without NUL, of at most %d bytes", MaxNote)}
	}
	if len(c.Lanes) > MaxLanes {
		return &InvalidError{"lanes", fmt.Sprintf("%d lanes: at most %d", len(c.Lanes), MaxLanes)}
	}
	seen := make(map[string]bool, len(c.Lanes))
	for i, l := range c.Lanes {
		field := fmt.Sprintf("lanes[%d]", i)
		if !connection.ValidName(l.Name) {
			return &InvalidError{field + ".name", fmt.Sprintf("%q: use lower-case letters, digits, '.', '_' and '-', at most 63", clip(l.Name))}
		}
		if seen[l.Name] {
			return &InvalidError{field + ".name", fmt.Sprintf("lane %s is named twice", l.Name)}
		}
		seen[l.Name] = true
		if l.ActiveRuns < 1 || l.ActiveRuns > MaxActiveRuns {
			return &InvalidError{field + ".active_runs", fmt.Sprintf("%d: want the lane's active run limit, 1 to %d", l.ActiveRuns, MaxActiveRuns)}
		}
		if err := checkShape(l.Shape, field+".shape"); err != nil {
			return err
		}
	}
	return nil
}

func checkProvider(p string) error {
	if !connection.ValidName(p) {
		return &InvalidError{"provider", fmt.Sprintf("%q: use lower-case letters, digits, '.', '_' and '-', at most 63, as connections name providers", clip(p))}
	}
	return nil
}

// CheckShape checks a run shape: known kinds, a call naming a provider of
// the connections' grammar with a fanout of 0 (1) to MaxFanout and no
// parts, every other node one part at least and neither provider nor
// fanout, at most MaxDepth deep and MaxNodes nodes.
func CheckShape(s toolplane.RunShape) error { return checkShape(s, "shape") }

func checkShape(s toolplane.RunShape, field string) error {
	nodes := 0
	return walk(s, field, 1, &nodes)
}

func walk(s toolplane.RunShape, field string, depth int, nodes *int) error {
	if depth > MaxDepth {
		return &InvalidError{field, fmt.Sprintf("the shape nests deeper than %d", MaxDepth)}
	}
	if *nodes++; *nodes > MaxNodes {
		return &InvalidError{field, fmt.Sprintf("the shape has more than %d nodes", MaxNodes)}
	}
	switch s.Kind {
	case toolplane.ShapeCall:
		if !connection.ValidName(s.Provider) {
			return &InvalidError{field + ".provider", fmt.Sprintf("%q: a call names the provider it calls, as connections name it", clip(s.Provider))}
		}
		if s.Fanout < 0 || s.Fanout > MaxFanout {
			return &InvalidError{field + ".fanout", fmt.Sprintf("%d: want the calls the node makes at once, 1 to %d (0 is 1)", s.Fanout, MaxFanout)}
		}
		if len(s.Parts) > 0 {
			return &InvalidError{field + ".parts", "a call has no parts"}
		}
		return nil
	case toolplane.ShapeSequence, toolplane.ShapeBranch, toolplane.ShapeParallel:
		if s.Provider != "" || s.Fanout != 0 {
			return &InvalidError{field, fmt.Sprintf("a %s names no provider and no fanout: those are a call's", s.Kind)}
		}
		if len(s.Parts) == 0 {
			return &InvalidError{field + ".parts", fmt.Sprintf("a %s has one part at least", s.Kind)}
		}
		for i, p := range s.Parts {
			if err := walk(p, fmt.Sprintf("%s.parts[%d]", field, i), depth+1, nodes); err != nil {
				return err
			}
		}
		return nil
	default:
		return &InvalidError{field + ".kind", fmt.Sprintf("%q: want sequence, branch, parallel or call", clip(string(s.Kind)))}
	}
}

// clip shortens what an error quotes back.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
