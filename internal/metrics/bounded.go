package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Overflow is the label value a family records a value under once it has
// seen as many distinct values of that label as it keeps, or as many
// series as it keeps: a flood of made-up names (a caller inventing tool or
// agent names, a bug minting ids) lands in one series instead of growing
// the process's memory and every scrape without bound.
const Overflow = "__overflow__"

// DefaultMaxLabelValues is how many distinct values of one label a family
// keeps when the Config names none.
const DefaultMaxLabelValues = 1000

// DefaultMaxSeries is how many series one family keeps when the Config
// names none. The label caps alone bound each label, not their product.
const DefaultMaxSeries = 20000

// maxLabels is the most labels a bounded family has.
const maxLabels = 4

// labels is one series' label values, in the family's order; unused
// positions stay empty. An array of strings is a map key that hashes
// without allocating.
type labels [maxLabels]string

// bounded is a metric vector whose children are looked up once per
// series and kept, with the number of distinct values of each label and
// of series capped. The steady state (a series seen before) is one read
// lock and one map lookup, and allocates nothing.
type bounded[T any] struct {
	family string
	n      int
	with   func(...string) T
	// maxValues and maxSeries are the caps; overflowed counts the values
	// recorded under Overflow.
	maxValues, maxSeries int
	overflowed           prometheus.Counter

	mu   sync.RWMutex
	seen [maxLabels]map[string]struct{}
	kids map[labels]T
}

func newBounded[T any](family string, n int, with func(...string) T, maxValues, maxSeries int, overflowed prometheus.Counter) *bounded[T] {
	b := &bounded[T]{family: family, n: n, with: with, maxValues: maxValues, maxSeries: maxSeries, overflowed: overflowed, kids: map[labels]T{}}
	for i := range n {
		b.seen[i] = map[string]struct{}{}
	}
	return b
}

// get answers the child of the series l names, or of the series it
// overflows into.
func (b *bounded[T]) get(l labels) T {
	b.mu.RLock()
	k, ok := b.kids[l]
	b.mu.RUnlock()
	if ok {
		return k
	}
	return b.admit(l)
}

// admit is get's slow path: a series not seen before, or one whose values
// overflowed (which is never cached under its own values, so a flood of
// them keeps nothing). A value past its cap takes this path, a write
// lock, on each call: a cost only a deployment past its caps pays, and
// the overflow alert tells it to raise them.
func (b *bounded[T]) admit(l labels) T {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k, ok := b.kids[l]; ok {
		return k
	}
	at := l
	over := false
	for i := range b.n {
		if _, ok := b.seen[i][l[i]]; ok {
			continue
		}
		if len(b.seen[i]) < b.maxValues {
			b.seen[i][l[i]] = struct{}{}
			continue
		}
		at[i], over = Overflow, true
	}
	if _, ok := b.kids[at]; !ok && len(b.kids) >= b.maxSeries {
		// Every series the family keeps is taken: the one series of all
		// labels overflowed holds the rest.
		for i := range b.n {
			at[i] = Overflow
		}
		over = true
	}
	k, ok := b.kids[at]
	if !ok {
		k = b.with(at[:b.n]...)
		b.kids[at] = k
	}
	if over {
		b.overflowed.Inc()
	}
	return k
}

// size answers how many series the family keeps.
func (b *bounded[T]) size() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.kids)
}
