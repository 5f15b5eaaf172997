package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrTooComplex reports a pair of schemas whose comparison would exceed the
// work bound. Schemas are author-controlled data, and references can make a
// small document describe an exponentially large tree, so the walk is
// bounded rather than trusted.
var ErrTooComplex = errors.New("schemas too complex to compare")

// maxSteps bounds how many pairs of subschemas one Diff compares. A real
// tool schema needs a few hundred.
const maxSteps = 1 << 17

// maxChanges bounds how many changes one Diff reports. A definition shared
// through $ref is reported at every field that uses it, and a document can
// use one definition exponentially often.
const maxChanges = 10_000

// Diff compares two JSON Schemas (draft 2020-12) of one side of a tool and
// answers every difference that matters, each with the bump it needs. side
// decides the direction: for SideInput accepting more is compatible, for
// SideOutput and SideError promising more is not. The comparison is
// structural: keyword by keyword, following $ref inside each document, so
// that reformatting, reordering or moving a definition into $defs is not a
// change. An empty or null schema is read as true, which constrains nothing.
//
// Changes come sorted by path. Diff(x, x, side) is always empty.
func Diff(before, after json.RawMessage, side Side) ([]Change, error) {
	cs, err := diff(before, after, side)
	if err != nil {
		return nil, fmt.Errorf("compat: diff: %w", err)
	}
	return cs, nil
}

func diff(before, after json.RawMessage, side Side) ([]Change, error) {
	switch side {
	case SideInput, SideOutput, SideError:
	default:
		return nil, fmt.Errorf("%q is not a schema side; use input, output or error", side)
	}
	o, err := decodeSchema(before)
	if err != nil {
		return nil, fmt.Errorf("old %s schema: %w", side, err)
	}
	n, err := decodeSchema(after)
	if err != nil {
		return nil, fmt.Errorf("new %s schema: %w", side, err)
	}
	d := &differ{
		side:   side,
		old:    newDocument(o),
		new:    newDocument(n),
		active: map[pair]bool{},
		done:   map[pair]*result{},
	}
	d.compare(o, "", n, "", "")
	if d.exhausted {
		return nil, fmt.Errorf("%s schema: %w (more than %d subschema pairs or %d changes)", side, ErrTooComplex, maxSteps, maxChanges)
	}
	sort.SliceStable(d.changes, func(i, j int) bool { return d.changes[i].Path < d.changes[j].Path })
	return d.changes, nil
}

// pair names two subschemas by their pointers in the old and new document.
type pair struct{ o, n string }

// result is what comparing one pair found, with the path it was found at,
// so that the same pair reached by another path reports the same changes
// there without being walked again.
type result struct {
	path    string
	changes []Change
}

// differ holds one comparison. active and done are what make the walk
// finite and cheap: a pair already being compared further up the stack (a
// recursive schema) is assumed equal there, since its changes are reported
// where its comparison started, and a pair compared once is never walked
// again, whichever path reaches it.
type differ struct {
	side      Side
	old, new  *document
	changes   []Change
	active    map[pair]bool
	done      map[pair]*result
	steps     int
	exhausted bool
}

// widened is the bump a change that lets more values through needs: fine
// for an input (every old value is still accepted), breaking for an output
// (a consumer may now receive a value it was promised it would not).
func (d *differ) widened() Bump {
	if d.side == SideInput {
		return Minor
	}
	return Major
}

// narrowed is the bump a change that lets fewer values through needs:
// breaking for an input (an old caller's value may now be refused), fine for
// an output (everything returned is still within the old promise). It is
// never PATCH, because the schema's meaning changed.
func (d *differ) narrowed() Bump {
	if d.side == SideInput {
		return Major
	}
	return Minor
}

func (d *differ) add(path, at string, k Kind, b Bump, format string, args ...any) {
	d.changes = append(d.changes, Change{Side: d.side, Path: path, Pointer: at, Kind: k, Detail: fmt.Sprintf(format, args...), Bump: b})
}

// escalate raises every MINOR change from index from on to MAJOR. It is
// used under keywords that are not monotone (oneOf, not, if, unevaluated*):
// there a change that widens the subschema can narrow the whole, or the
// reverse, so its direction proves nothing.
func (d *differ) escalate(from int, why string) {
	for i := from; i < len(d.changes); i++ {
		c := &d.changes[i]
		if c.Bump == Minor {
			c.Bump = Major
			c.Detail += " (" + why + ")"
		}
	}
}

// compare compares the subschema o at oAt in the old document with n at nAt
// in the new one; path is the field both describe.
func (d *differ) compare(o any, oAt string, n any, nAt string, path string) {
	if d.exhausted {
		return
	}
	key := pair{nodeKey(o, oAt), nodeKey(n, nAt)}
	if d.active[key] {
		return
	}
	if r, ok := d.done[key]; ok {
		for _, c := range r.changes {
			c.Path = repath(c.Path, r.path, path)
			d.changes = append(d.changes, c)
		}
		if len(d.changes) > maxChanges {
			d.exhausted = true
		}
		return
	}
	d.steps++
	if d.steps > maxSteps {
		d.exhausted = true
		return
	}
	d.active[key] = true
	start := len(d.changes)
	d.compareNode(o, oAt, n, nAt, path)
	delete(d.active, key)
	if !d.exhausted {
		d.done[key] = &result{path: path, changes: slices.Clone(d.changes[start:])}
	}
}

// nodeKey names a subschema for the walk's bookkeeping: its pointer, except
// that every boolean schema is one and the same wherever it sits. That
// matters for an absent keyword, which reads as true at a pointer that does
// not exist: against a recursive schema on the other side, each level would
// otherwise be a new pair and the walk would never close the loop.
func nodeKey(v any, at string) string {
	if b, ok := v.(bool); ok {
		if b {
			return "#true"
		}
		return "#false"
	}
	return at
}

// repath moves a change path found under from to the same place under to.
// Paths below a field always extend it with "." or "[".
func repath(p, from, to string) string {
	if from == to || !strings.HasPrefix(p, from) {
		return p
	}
	rel := p[len(from):]
	switch {
	case rel == "":
		return to
	case from == "" && rel[0] != '[':
		return joinPath(to, rel)
	case to == "" && rel[0] == '.':
		return rel[1:]
	}
	return to + rel
}

func (d *differ) compareNode(o any, oAt string, n any, nAt string, path string) {
	if isFalse(o) {
		if !isFalse(n) {
			d.add(path, nAt, KindConstraintWidened, d.widened(), "accepted no value (schema false) and now accepts some")
		}
		return
	}
	if isFalse(n) {
		d.add(path, nAt, KindConstraintNarrowed, d.narrowed(), "now accepts no value (schema false)")
		return
	}
	om, ok1 := asObject(o)
	nm, ok2 := asObject(n)
	if !ok1 || !ok2 {
		if !equalJSON(o, n) {
			d.add(path, nAt, KindUnclassified, Major, "the schema is neither an object nor a boolean, and it changed")
		}
		return
	}
	d.compareObjects(d.old.flatten(om, oAt), oAt, d.new.flatten(nm, nAt), nAt, path)
}

func isFalse(v any) bool {
	b, ok := v.(bool)
	return ok && !b
}

// asObject reads a schema as an object; true is the empty object, which
// asserts nothing either.
func asObject(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, true
	case bool:
		if x {
			return map[string]any{}, true
		}
	}
	return nil, false
}
