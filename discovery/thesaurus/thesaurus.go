// Package thesaurus is the thesaurus discovery ships with the binary, so
// that a query finds a tool described in other words ("reimburse the
// customer" finds refund_order) with no network and no model: a hand-curated
// list of the words of software operations and business systems, over
// related words drawn from WordNet 3.0 (Princeton University; licence in
// WORDNET-LICENSE beside the data).
//
// Words are analysed terms (discovery.Terms: lower case, Porter stems),
// the form the engine looks them up in. Default loads the embedded data
// once, on first use; Parse reads a deployment's own list, and Combine
// puts it before the default.
//
// # The list format
//
// Parse reads UTF-8 text, one group of related words a line:
//
//	# A comment runs to the end of its line.
//	delete, remove, erase, purge           every word relates to every other
//	0.7: ticket, issue, incident, case     the same, at weight 0.7
//	refund => reimburse, repay, money back each word on the left relates to
//	                                       each on the right, not back
//	user != use, usage                     no word on the left relates to
//	                                       one on the right, nor the reverse,
//	                                       here or in a later list (Combine)
//
// A weight, in (0,1], is how nearly the words stand for each other: 1 is
// as good as the word itself; without one a group weighs DefaultWeight.
// Words are analysed as queries are, so "deletes" and "deletion" are the
// same word. A phrase that analyses to several terms ("money back") is
// only ever a related word, never a looked-up one (the engine looks up one
// term at a time), and each of its terms stands for it at PhraseWeight of
// the group's weight. A pair listed in several groups keeps its greatest
// weight. A != line, which takes no weight, is how a list overrules what a
// later one (WordNet's, in Default) would relate: the stem "us" of "use"
// is not what a query for users means. Each word keeps its MaxRelated
// best related words; weights are kept to four decimal places.
//
// # The data
//
// domain.txt is the curated list, in the format above. wordnet.txt.gz is
// written by internal/thesaurusgen from Debian's wordnet-base (see there
// for how relations are chosen and weighed); it is keyed by the terms
// discovery.Terms makes, so a change to the analysis means generating it
// again:
//
//	apt-get install wordnet-base && go generate ./discovery/thesaurus
package thesaurus

//go:generate go run ../../internal/thesaurusgen -out wordnet.txt.gz

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolplane/toolplane/discovery"
)

// Bounds and defaults of the list format.
const (
	// MaxRelated bounds the related words Related answers for a word
	// (the engine reads no more than this many).
	MaxRelated = 24
	// DefaultWeight is a group's weight when its line gives none.
	DefaultWeight = 0.9
	// PhraseWeight is the share of a group's weight each term of a
	// several-word phrase in it carries.
	PhraseWeight = 0.5
)

// ErrFormat: a list given to Parse is not in the format the package
// documents.
var ErrFormat = errors.New("thesaurus: malformed list")

//go:embed domain.txt
var domainList []byte

//go:embed wordnet.txt.gz
var wordnetData []byte

// Thesaurus answers the words related to a word. Its zero value relates
// nothing. It is safe for concurrent use.
type Thesaurus struct {
	tables []*table // earlier ones outrank later ones
}

var _ discovery.Thesaurus = (*Thesaurus)(nil)

// Default answers the shipped thesaurus: the curated domain list, which
// outranks WordNet's relations. The data is read on the first call.
func Default() *Thesaurus { return loadDefault() }

var loadDefault = sync.OnceValue(func() *Thesaurus {
	domain, err := parseList(bytes.NewReader(domainList))
	if err != nil {
		// The embedded list is part of the build; its test reads it.
		panic(fmt.Sprintf("thesaurus: embedded domain list: %v", err))
	}
	wn, err := parseCompiled(wordnetData)
	if err != nil {
		panic(fmt.Sprintf("thesaurus: embedded WordNet data: %v", err))
	}
	return &Thesaurus{tables: []*table{domain, wn}}
})

// Parse reads a list in the format the package documents.
func Parse(r io.Reader) (*Thesaurus, error) {
	t, err := parseList(r)
	if err != nil {
		return nil, err
	}
	return &Thesaurus{tables: []*table{t}}, nil
}

// Combine answers a thesaurus that relates what each of ts does; where
// they disagree on a pair, or a word has more related words than
// MaxRelated, the earlier ones win. Combine(own, Default()) puts a
// deployment's list before the shipped one.
func Combine(ts ...*Thesaurus) *Thesaurus {
	var c Thesaurus
	for _, t := range ts {
		if t != nil {
			c.tables = append(c.tables, t.tables...)
		}
	}
	return &c
}

// Related answers the words related to term, an analysed term, best
// first: at most MaxRelated, never term itself, each weight in (0,1].
func (t *Thesaurus) Related(term string) []discovery.Related {
	var out []discovery.Related
	for i, tab := range t.tables {
		for _, e := range tab.related(term) {
			if len(out) == MaxRelated {
				break
			}
			to := tab.names[e.to]
			if to == term || slices.ContainsFunc(out, func(r discovery.Related) bool { return r.Term == to }) {
				continue
			}
			if slices.ContainsFunc(t.tables[:i], func(u *table) bool { return u.unrelated[[2]string{term, to}] }) {
				continue
			}
			out = append(out, discovery.Related{Term: to, Weight: e.w()})
		}
	}
	// Each table's words are in order; merged, the best come first
	// whichever table they came from.
	slices.SortStableFunc(out, func(a, b discovery.Related) int {
		switch {
		case a.Weight > b.Weight:
			return -1
		case a.Weight < b.Weight:
			return 1
		}
		return 0
	})
	return out
}

// table is one source's relations, terms interned.
type table struct {
	ids   map[string]uint32
	names []string
	rel   [][]edge // by id; best first
	// unrelated are the pairs (both ways) that later tables may not
	// relate.
	unrelated map[[2]string]bool
}

// edge is one relation, its weight in ten-thousandths: what a list's
// weight rounds to, and exactly the float64 a caller reads (0.9, not a
// float32's 0.8999999761581421).
type edge struct {
	to     uint32
	weight uint16
}

// weightUnit is the scale of edge.weight.
const weightUnit = 10000

func (e edge) w() float64 { return float64(e.weight) / weightUnit }

// toEdgeWeight rounds a weight in (0,1] to an edge's, never to 0.
func toEdgeWeight(w float64) uint16 { return uint16(max(1, math.Round(w*weightUnit))) }

func newTable() *table { return &table{ids: map[string]uint32{}} }

func (t *table) id(term string) uint32 {
	if i, ok := t.ids[term]; ok {
		return i
	}
	i := uint32(len(t.names))
	t.ids[term] = i
	t.names = append(t.names, term)
	t.rel = append(t.rel, nil)
	return i
}

func (t *table) related(term string) []edge {
	i, ok := t.ids[term]
	if !ok {
		return nil
	}
	return t.rel[i]
}

// terms answers how many terms the table relates something to.
func (t *table) terms() int {
	n := 0
	for _, r := range t.rel {
		if len(r) > 0 {
			n++
		}
	}
	return n
}

// parseCompiled reads the data internal/thesaurusgen writes: gzip'd lines
// "term related:pct related:pct ...", related terms best first, weights
// in hundredths; lines beginning with # are comments.
func parseCompiled(data []byte) (*table, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	// gzip's trailer holds the size of the text (mod 4 GiB), so it is
	// read into one buffer of that size.
	var size int
	if len(data) >= 4 {
		size = int(binary.LittleEndian.Uint32(data[len(data)-4:]))
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	raw := buf.Bytes()
	t := newTable()
	terms := bytes.Count(raw, []byte{'\n'})
	t.ids = make(map[string]uint32, terms+terms/4)
	t.names = make([]string, 0, terms+terms/4)
	t.rel = make([][]edge, 0, terms+terms/4)
	// One backing array for every term's edges: a few hundred thousand
	// small slices would cost the collector more than the data.
	edges := make([]edge, 0, bytes.Count(raw, []byte{':'}))
	text := string(raw) // terms are substrings of it: one allocation
	for n := 1; text != ""; n++ {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		term, rest, _ := strings.Cut(line, " ")
		from := t.id(term)
		lo := len(edges)
		for rest != "" {
			var f string
			f, rest, _ = strings.Cut(rest, " ")
			to, pct, ok := strings.Cut(f, ":")
			p, err := strconv.Atoi(pct)
			if !ok || err != nil || p < 1 || p > 100 || to == "" {
				return nil, fmt.Errorf("%w: WordNet data line %d: %q", ErrFormat, n, f)
			}
			edges = append(edges, edge{to: t.id(to), weight: uint16(p * weightUnit / 100)})
		}
		t.rel[from] = edges[lo:len(edges):len(edges)]
	}
	return t, nil
}

// parseList reads the list format the package documents.
func parseList(r io.Reader) (*table, error) {
	w := map[[2]string]float64{}
	unrelated := map[[2]string]bool{}
	add := func(from, to string, weight float64) {
		if from != to {
			k := [2]string{from, to}
			w[k] = max(w[k], weight)
		}
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if left, right, ok := strings.Cut(line, "!="); ok {
			if err := parseUnrelated(left, right, unrelated); err != nil {
				return nil, fmt.Errorf("%w: line %d: %w", ErrFormat, n, err)
			}
			continue
		}
		weight := DefaultWeight
		if head, rest, ok := strings.Cut(line, ":"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(head), 64)
			if err != nil || !(v > 0 && v <= 1) {
				return nil, fmt.Errorf("%w: line %d: weight %q is not in (0,1]", ErrFormat, n, head)
			}
			weight, line = v, rest
		}
		left, right, oneWay := strings.Cut(line, "=>")
		from, err := members(left)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrFormat, n, err)
		}
		to := from
		if oneWay {
			if to, err = members(right); err != nil {
				return nil, fmt.Errorf("%w: line %d: %w", ErrFormat, n, err)
			}
		}
		if !oneWay && len(from) < 2 {
			return nil, fmt.Errorf("%w: line %d: a group needs two words or more", ErrFormat, n)
		}
		for _, a := range from {
			if len(a) != 1 {
				if oneWay {
					return nil, fmt.Errorf("%w: line %d: a phrase cannot be looked up, so it cannot stand left of =>", ErrFormat, n)
				}
				continue
			}
			for _, b := range to {
				bw := weight
				if len(b) > 1 {
					bw *= PhraseWeight
				}
				for _, term := range b {
					add(a[0], term, bw)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("thesaurus: reading list: %w", err)
	}
	t := newTable()
	t.unrelated = unrelated
	keys := make([][2]string, 0, len(w))
	for k := range w {
		if !unrelated[k] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		if wa, wb := w[a], w[b]; wa != wb {
			if wa > wb {
				return -1
			}
			return 1
		}
		return strings.Compare(a[1], b[1])
	})
	for _, k := range keys {
		from := t.id(k[0])
		if len(t.rel[from]) < MaxRelated {
			t.rel[from] = append(t.rel[from], edge{to: t.id(k[1]), weight: toEdgeWeight(w[k])})
		}
	}
	return t, nil
}

// parseUnrelated adds the pairs of a != line, both ways.
func parseUnrelated(left, right string, into map[[2]string]bool) error {
	if strings.Contains(left, ":") {
		return errors.New("!= takes no weight")
	}
	a, err := members(left)
	if err != nil {
		return err
	}
	b, err := members(right)
	if err != nil {
		return err
	}
	for _, x := range a {
		for _, y := range b {
			if len(x) != 1 || len(y) != 1 {
				return errors.New("a phrase is never looked up, so != takes single words")
			}
			into[[2]string{x[0], y[0]}] = true
			into[[2]string{y[0], x[0]}] = true
		}
	}
	return nil
}

// members analyses the comma-separated words of one side of a line, each
// into its terms.
func members(s string) ([][]string, error) {
	var out [][]string
	for m := range strings.SplitSeq(s, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, errors.New("an empty word")
		}
		ts := discovery.Terms(m)
		if len(ts) == 0 {
			return nil, fmt.Errorf("%q is only stop words", m)
		}
		out = append(out, slices.Compact(ts))
	}
	return out, nil
}

// Lazy answers the shipped thesaurus as one that reads its data on the
// first Related, not before: a node nobody searches never holds it.
func Lazy() discovery.Thesaurus { return lazy{} }

type lazy struct{}

func (lazy) Related(term string) []discovery.Related { return Default().Related(term) }
