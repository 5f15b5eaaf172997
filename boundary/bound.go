package boundary

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolplane/toolplane"
)

// PlatformLimit is the most bytes any answer may encode to. A tool may lower
// it with max_output_bytes but never raise it: the limit protects the
// model's context and every store that keeps a result.
const PlatformLimit = 32 << 10

// MinLimit is the smallest legal byte limit: "[]", "{}" and "" each take two
// bytes, and one of them can always stand in for any answer.
const MinLimit = 2

// ErrLimitTooSmall is the value Bound panics with (wrapped) when given a limit
// below MinLimit. Registration refuses such a max_output_bytes, so meeting
// one here is a programming error rather than a payload problem.
var ErrLimitTooSmall = errors.New("boundary: byte limit below the two-byte minimum")

// Limit returns the byte limit for a tool that declares maxOutputBytes: the
// declared value when it is positive and lower than PlatformLimit, else
// PlatformLimit. A declared value of 1 is raised to MinLimit, since no JSON
// fits in one byte.
func Limit(maxOutputBytes int) int {
	if maxOutputBytes <= 0 {
		return PlatformLimit
	}
	return max(min(maxOutputBytes, PlatformLimit), MinLimit)
}

// The names inside a Dropped marker.
const (
	// MarkerKey is the one key of a Dropped marker. It is the single
	// lookup that tells a reader an item was withheld.
	MarkerKey = "__dropped__"
	// ReasonTooLarge is the reason of a marker that bounding wrote.
	ReasonTooLarge = "too_large"
)

// Marker builds a Dropped marker for a value that encoded to bytes bytes. A
// non-nil ref names the row the marker stands in for, so a model can fetch it
// by other means; the ref lives inside the marker so the reason, the size and
// the pointer travel together and a ref never poses as a row.
func Marker(bytes int, ref *toolplane.ResourceRef) map[string]any {
	inner := map[string]any{
		"reason": ReasonTooLarge,
		"bytes":  json.Number(strconv.Itoa(bytes)),
	}
	if ref != nil {
		inner["ref"] = refValue(ref.Kind, ref.ID)
	}
	return map[string]any{MarkerKey: inner}
}

func refValue(kind, id string) map[string]any {
	return map[string]any{"kind": kind, "id": id}
}

// IsMarker reports whether v is a Dropped marker: an object whose only key is
// MarkerKey, holding an object with a string "reason". Bounding treats such a
// value as atomic.
func IsMarker(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	inner, ok := m[MarkerKey].(map[string]any)
	if !ok {
		return false
	}
	_, ok = inner["reason"].(string)
	return ok
}

// markerFrame is a marker without the digits of its size; markerSize adds
// them, so a marker's size is known before one is built.
const markerFrame = `{"__dropped__":{"bytes":,"reason":"too_large"}}`

func markerSize(bytes int) int {
	return len(markerFrame) + digits(bytes)
}

func digits(n int) int {
	d := 1
	if n < 0 {
		d++
		n = -n
	}
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// Bound returns a form of the plain tree v whose Size is at most limit, and
// whether it had to change v to get there. A v that fits is returned as it
// is. The answer is always a well-formed tree; the package documentation
// gives the exact rules. Bound panics with ErrLimitTooSmall when limit is
// below MinLimit.
func Bound(v any, limit int) (any, bool) {
	if limit < MinLimit {
		panic(fmt.Errorf("bound to %d bytes: %w", limit, ErrLimitTooSmall))
	}
	if a, ok := v.([]any); ok {
		out, changed := shrinkArray(a, limit)
		if !changed {
			return v, false
		}
		return out, true
	}
	size := Size(v)
	if size <= limit {
		return v, false
	}
	if out, ok := fit(v, size, limit); ok {
		return out, true
	}
	return "", true
}

// fit returns v, of encoded size size, in a form that takes at most budget
// bytes: v itself when it fits, else v shrunk in place, else a marker. It
// reports false when not even a marker fits, leaving the caller to remove
// the value.
func fit(v any, size, budget int) (any, bool) {
	if size <= budget {
		return v, true
	}
	if budget < MinLimit || IsMarker(v) {
		return nil, false
	}
	switch t := v.(type) {
	case []any:
		out, _ := shrinkArray(t, budget)
		return out, true
	case map[string]any:
		if out, ok := shrinkObject(t, budget); ok {
			return out, true
		}
	}
	if markerSize(size) <= budget {
		return Marker(size, nil), true
	}
	return nil, false
}

// shrinkArray returns a in at most budget bytes, and whether that took a
// change. budget is at least MinLimit.
//
// Shrinking oversized elements in place and then cutting the tail until the
// array fits keeps the longest prefix that fits, because every element adds
// bytes. So the elements are taken in order, each shrunk if it is oversized,
// and the walk stops at the first one that would take the array over budget:
// nothing after it is measured at all, which keeps bounding a long list
// proportional to what is kept rather than to what the tool returned.
func shrinkArray(a []any, budget int) ([]any, bool) {
	var fill arrayFill
	fill.start(budget)
	var out []any // a copy, made once an element is replaced
	for i, e := range a {
		ne, replaced, ok := fill.add(e)
		if !ok {
			return prefix(a, out, i), true
		}
		if replaced && out == nil {
			out = make([]any, len(a))
			copy(out, a[:i])
		}
		if out != nil {
			out[i] = ne
		}
	}
	if out == nil {
		return a, false
	}
	return out, true
}

// arrayFill is the running state of bounding one array, element by element.
type arrayFill struct {
	budget, room, total, n int
}

func (f *arrayFill) start(budget int) {
	*f = arrayFill{budget: budget, room: budget - 2, total: 2}
}

// add takes the next element, shrunk in place when it is larger than the
// room one element has, and reports false when the array must end before
// it: because not even a marker for it fits, or because it would take the
// array over budget.
func (f *arrayFill) add(e any) (out any, replaced, ok bool) {
	size := Size(e)
	out = e
	if size > f.room {
		if out, ok = fit(e, size, f.room); !ok {
			// Removing this element alone would move every later
			// element up one index; ending the array here keeps index
			// i of the answer answering for index i of the input.
			return nil, false, false
		}
		replaced = true
		size = Size(out)
	}
	if f.n > 0 {
		size++ // the comma
	}
	if f.total+size > f.budget {
		return nil, false, false
	}
	f.total += size
	f.n++
	return out, replaced, true
}

// prefix returns the first n elements of out, or of a when nothing was
// replaced. The capacity is cut too, so nobody appending to the answer
// writes into the input's backing array.
func prefix(a, out []any, n int) []any {
	if out == nil {
		return a[:n:n]
	}
	return out[:n:n]
}

// entry is one key of an object being shrunk.
type entry struct {
	key      string
	value    any
	keySize  int
	size     int // encoded size of value as it stands now
	origSize int // encoded size of the value bounding was given
}

// shrinkObject returns m over budget bytes as an object with every key kept
// that fits, or false when no such object exists.
func shrinkObject(m map[string]any, budget int) (map[string]any, bool) {
	entries := make([]entry, 0, len(m))
	for k, v := range m {
		s := Size(v)
		entries = append(entries, entry{key: k, value: v, keySize: stringSize(k), size: s, origSize: s})
	}
	// A fixed order makes ties between equal sizes resolve the same way on
	// every run.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })

	total := 2 + max(len(entries)-1, 0)
	for _, e := range entries {
		total += e.keySize + 1 + e.size
	}
	for i := range entries {
		e := &entries[i]
		room := budget - 2 - e.keySize - 1
		if e.size <= room {
			continue
		}
		nv, ok := fit(e.value, e.size, room)
		if !ok {
			return nil, false
		}
		ns := Size(nv)
		total += ns - e.size
		e.value, e.size = nv, ns
	}
	if total > budget {
		// Replace the largest values first: each replacement then
		// removes as much as it can, and the fewest values are lost.
		order := make([]int, 0, len(entries))
		for i, e := range entries {
			if !IsMarker(e.value) && markerSize(e.origSize) < e.size {
				order = append(order, i)
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return entries[b].size - entries[a].size })
		for _, i := range order {
			if total <= budget {
				break
			}
			e := &entries[i]
			ms := markerSize(e.origSize)
			total -= e.size - ms
			e.value, e.size = Marker(e.origSize, nil), ms
		}
		if total > budget {
			return nil, false
		}
	}
	out := make(map[string]any, len(entries))
	for _, e := range entries {
		out[e.key] = e.value
	}
	return out, true
}
