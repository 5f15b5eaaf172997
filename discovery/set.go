package discovery

import (
	"container/list"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/toolplane/toolplane/registry"
)

// BM25's term-frequency saturation.
const k1 = 1.2

// set is the inverted index of one caller's candidates: built from their
// docs alone, so its statistics (how many candidates hold a word, how
// long each field is on average) and the work a search over it does
// depend on nothing the caller may not call.
type set struct {
	docs []*doc
	// post maps a word to the candidates holding it, each with its
	// BM25F weight (the field-weighted, length-normalised count).
	post map[string][]posting
	// rel maps a word to the candidates holding a word related to it
	// (by the thesaurus), each with its weight there times how close the
	// two are: a query's word meets a tool's in the words both relate
	// to, not only when one relates to the other.
	rel map[string][]posting
	// byName finds a candidate by platform name.
	byName map[string]int
}

// posting is one candidate holding a word: its saturated BM25F weight
// for the word, and the fields the word is in (bits by field).
type posting struct {
	doc    int32
	w      float32
	fields uint8
}

// idf is BM25's inverse document frequency of a word n candidates of N
// hold: a word every tool holds says little.
func idf(n, N int) float64 {
	return math.Log(1 + (float64(N)-float64(n)+0.5)/(float64(n)+0.5))
}

// sat saturates a BM25F weight: the tenth mention of a word adds little
// to the first.
func sat(w float64) float64 { return w * (k1 + 1) / (w + k1) }

func newSet(docs []*doc, related func(string) []Related) *set {
	s := &set{docs: docs, post: map[string][]posting{}, rel: map[string][]posting{}, byName: make(map[string]int, len(docs))}
	var avg [numFields]float64
	for _, d := range docs {
		for f := range numFields {
			avg[f] += float64(d.len[f])
		}
	}
	for f := range numFields {
		if len(docs) > 0 {
			avg[f] /= float64(len(docs))
		}
		if avg[f] == 0 {
			avg[f] = 1
		}
	}
	typical := medianWords(docs)
	for i, d := range docs {
		s.byName[d.tool.Def.Name] = i
		// A tool holding far more distinct words than the typical
		// candidate (a text written to match every query) weighs less
		// for each: saturation alone would let it match every query's
		// every word at the most any tool can.
		prior := 1.0
		if limit := wordyFactor * typical; float64(d.words) > limit {
			prior = limit / float64(d.words)
		}
		var norm [numFields]float64
		for f := range numFields {
			norm[f] = fieldWeight[f] / (1 - fieldB[f] + fieldB[f]*float64(d.len[f])/avg[f])
		}
		for w, tf := range d.tf {
			var x float64
			var fields uint8
			for f := range numFields {
				if tf[f] > 0 {
					x += float64(tf[f]) * norm[f]
					fields |= 1 << f
				}
			}
			s.post[w] = append(s.post[w], posting{doc: int32(i), w: float32(prior * sat(x)), fields: fields})
		}
		if related == nil {
			continue
		}
		// The doc's related words, each at its best.
		best := map[string]posting{}
		for w, tf := range d.tf {
			var x float64
			var fields uint8
			for f := range numFields {
				if tf[f] > 0 {
					x += float64(tf[f]) * norm[f]
					fields |= 1 << f
				}
			}
			x = prior * sat(x)
			for _, r := range d.relatedOf(w, related) {
				if _, own := d.tf[r.Term]; own {
					continue
				}
				v := float32(x * r.Weight)
				if b, ok := best[r.Term]; !ok || v > b.w {
					best[r.Term] = posting{doc: int32(i), w: v, fields: fields}
				}
			}
		}
		for t, p := range best {
			s.rel[t] = append(s.rel[t], p)
		}
	}
	return s
}

// wordyFactor is how many times the typical candidate's distinct words a
// tool may hold before each weighs less.
const wordyFactor = 4

// medianWords answers the median number of distinct words of docs (at
// least 8): the typical candidate, which one outlier does not move.
func medianWords(docs []*doc) float64 {
	if len(docs) == 0 {
		return 8
	}
	ns := make([]int, len(docs))
	for i, d := range docs {
		ns[i] = d.words
	}
	slices.Sort(ns)
	return math.Max(8, float64(ns[len(ns)/2]))
}

// sets caches the candidate sets of recent callers, least recently used
// out first: a caller's candidates change only when its grants or the
// catalogue do, and building a set costs more than searching it.
type sets struct {
	mu    sync.Mutex
	max   int
	seed  maphash.Seed
	items map[setKey]*list.Element
	order *list.List
}

type setKey struct {
	a, b uint64
	n    int
}

type setItem struct {
	key setKey
	set *set
}

func newSets(max int) *sets {
	return &sets{max: max, seed: maphash.MakeSeed(), items: map[setKey]*list.Element{}, order: list.New()}
}

// key fingerprints a candidate list: the versions it holds, in order. A
// registry.Tool is immutable and replaced, never changed, when its
// version's state or contract moves, so its address names it.
func (c *sets) key(ts []*registry.Tool) setKey {
	var h1, h2 maphash.Hash
	h1.SetSeed(c.seed)
	h2.SetSeed(c.seed)
	h2.WriteByte(0x5a)
	var buf [8]byte
	for _, t := range ts {
		p := uint64(uintptr(unsafe.Pointer(t)))
		for i := range 8 {
			buf[i] = byte(p >> (8 * i))
		}
		h1.Write(buf[:])
		h2.Write(buf[:])
	}
	return setKey{a: h1.Sum64(), b: h2.Sum64(), n: len(ts)}
}

func (c *sets) get(k setKey) *set {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*setItem).set
	}
	return nil
}

func (c *sets) put(k setKey, s *set) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&setItem{key: k, set: s})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*setItem).key)
	}
}

// clear forgets every set: the catalogue changed, so every caller's
// candidates are new versions.
func (c *sets) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = map[setKey]*list.Element{}
	c.order.Init()
}
