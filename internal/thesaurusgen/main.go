// Command thesaurusgen builds the WordNet part of the thesaurus
// discovery/thesaurus ships: it reads WordNet 3.0 as Debian's
// wordnet-base package installs it and writes, for every analysed term
// (discovery.Terms) a WordNet lemma maps to, its best related terms with
// a weight. Run it from the module root after `apt-get install
// wordnet-base`:
//
//	go run ./internal/thesaurusgen
//
// The output is committed, so building or testing needs no WordNet.
//
// What relates, and how much (before the sense weights below):
//
//	synonym (same synset)                      0.80
//	derivationally related form (+)            0.65
//	similar-to adjective (&), verb group ($)   0.60
//	hypernym, one level (@, @i; nouns, verbs)  0.50
//	hyponym, one level (~, ~i; first senses)   0.40
//
// A relation is weighed by how likely the sense it comes through is what
// a word means: WordNet's sense order and tag counts (cntlist.rev) for
// the word, and for the related word too, so that "order" relates to what
// an order usually is and not to every rare sense's synonyms. How familiar
// the related word is (its tag count) weighs too, most for hyponyms, so
// that "remove" leaves its 24 places to "delete" rather than to
// "decarburise". A lemma of
// several words is kept when it analyses to a single term ("log_in" is
// "log"), since the engine relates one term to another; the rest are left
// out.
package main

import (
	"compress/gzip"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolplane/toolplane/discovery"
)

// Bounds on the output.
const (
	maxRelated = 24   // related terms kept per term, best first
	minWeight  = 0.12 // weaker relations are left out
	maxSenses  = 8    // senses of a lemma considered, most frequent first
	maxHypoOf  = 3    // hyponyms are taken from this many first senses only
)

// The weight of each relation, before sense weights.
const (
	wSynonym    = 0.80
	wDerived    = 0.65
	wSimilar    = 0.60
	wHypernym   = 0.50
	wHyponym    = 0.40
	minLemmaWgt = 0.25 // floor of a rarely tagged lemma's share of a term
)

func main() {
	dir := flag.String("wordnet", "/usr/share/wordnet", "directory of WordNet 3.0's database files")
	out := flag.String("out", "discovery/thesaurus/wordnet.txt.gz", "file to write")
	flag.Parse()
	wn, err := load(*dir)
	if err != nil {
		log.Fatal(err)
	}
	rel := build(wn)
	if err := write(*out, rel); err != nil {
		log.Fatal(err)
	}
	n := 0
	for _, r := range rel {
		n += len(r)
	}
	fmt.Printf("%d terms, %d relations written to %s\n", len(rel), n, *out)
}

type synKey struct {
	pos    byte
	offset int64
}

type lemmaKey struct {
	lemma string
	pos   byte
}

// wordNet is what build reads of the database.
type wordNet struct {
	synsets map[synKey]*synset
	index   map[lemmaKey][]int64 // senses, most frequent first
	counts  map[lemmaKey][]int   // tag count by sense number - 1
}

func load(dir string) (*wordNet, error) {
	wn := &wordNet{
		synsets: map[synKey]*synset{},
		index:   map[lemmaKey][]int64{},
		counts:  map[lemmaKey][]int{},
	}
	for _, p := range []string{"noun", "verb", "adj", "adv"} {
		if err := readFile(filepath.Join(dir, "data."+p), func(line string) error {
			s, err := parseData(line)
			if err != nil {
				return err
			}
			wn.synsets[synKey{s.pos, s.offset}] = &s
			return nil
		}); err != nil {
			return nil, err
		}
		if err := readFile(filepath.Join(dir, "index."+p), func(line string) error {
			e, err := parseIndex(line)
			if err != nil {
				return err
			}
			wn.index[lemmaKey{e.lemma, e.pos}] = e.offsets
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := readFile(filepath.Join(dir, "cntlist.rev"), func(line string) error {
		c, err := parseCount(line)
		if err != nil {
			return err
		}
		k := lemmaKey{c.lemma, c.pos}
		cs := wn.counts[k]
		for len(cs) < c.sense {
			cs = append(cs, 0)
		}
		cs[c.sense-1] += c.count
		wn.counts[k] = cs
		return nil
	}); err != nil {
		return nil, err
	}
	return wn, nil
}

func readFile(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("wordnet: %w", err)
	}
	defer f.Close()
	if err := eachLine(f, fn); err != nil {
		return fmt.Errorf("wordnet: %s: %w", path, err)
	}
	return nil
}

// builder computes the relations, memoising each lemma's term.
type builder struct {
	wn    *wordNet
	tags  map[string]int // tag count of a lemma, all parts of speech
	terms map[string]string
	rel   map[string]map[string]float64
}

// term answers the single analysed term a lemma stands for, or "" when
// it has none, several, or is a name (capitalised in WordNet).
func (b *builder) term(lemma string) string {
	if t, ok := b.terms[lemma]; ok {
		return t
	}
	t := ""
	if strings.ToLower(lemma) == lemma {
		if ts := discovery.Terms(strings.ReplaceAll(lemma, "_", " ")); len(ts) == 1 {
			t = ts[0]
		}
	}
	b.terms[lemma] = t
	return t
}

// decay is the weight of a lemma's sense by its rank (0 = most frequent).
func decay(rank int) float64 { return 1 / (1 + 0.4*float64(rank)) }

// senseWeight weighs sense rank of a lemma by its order and, where the
// lemma was tagged often enough to tell, by its tag count.
func (b *builder) senseWeight(k lemmaKey, rank int) float64 {
	w := decay(rank)
	cs := b.wn.counts[k]
	if m := slices.Max(append([]int{0}, cs...)); m >= 3 {
		c := 0
		if rank < len(cs) {
			c = cs[rank]
		}
		w *= 0.5 + 0.5*math.Sqrt(float64(c)/float64(m))
	}
	return w
}

// targetWeight is how much synset s is what the related word w means,
// and how familiar a word w is: a word rarely met in the tagged corpora
// weighs down to 1-fam.
func (b *builder) targetWeight(w string, s *synset, fam float64) float64 {
	lw := strings.ToLower(w)
	f := 1 - fam + fam*min(1, math.Log1p(float64(b.tags[lw]))/math.Log1p(50))
	k := lemmaKey{lw, s.pos}
	r := slices.Index(b.wn.index[k], s.offset)
	if r < 0 {
		return 0.5 * f
	}
	return math.Sqrt(b.senseWeight(k, r)) * f
}

// How much a related word's familiarity weighs, by relation.
const (
	famNear  = 0.3 // synonyms, derived forms, similar adjectives
	famUp    = 0.4 // hypernyms
	famHypon = 0.75
)

func (b *builder) add(from, to string, w float64) {
	if to == "" || to == from || w < minWeight {
		return
	}
	m := b.rel[from]
	if m == nil {
		m = map[string]float64{}
		b.rel[from] = m
	}
	m[to] = max(m[to], w)
}

// addWords relates from to every word of s but skip (1-based; 0 none).
func (b *builder) addWords(from string, s *synset, skip int, w, fam float64) {
	for i, wd := range s.words {
		if i+1 != skip {
			b.add(from, b.term(wd.lemma), w*b.targetWeight(wd.lemma, s, fam))
		}
	}
}

func build(wn *wordNet) map[string][]related {
	b := &builder{wn: wn, tags: map[string]int{}, terms: map[string]string{}, rel: map[string]map[string]float64{}}
	for k, cs := range wn.counts {
		for _, c := range cs {
			b.tags[k.lemma] += c
		}
	}
	// The lemmas of each term, and their tag counts.
	byTerm := map[string][]lemmaKey{}
	for k := range wn.index {
		if t := b.term(k.lemma); t != "" {
			byTerm[t] = append(byTerm[t], k)
		}
	}
	// How common a lemma is in one part of speech: its tag count, and
	// its number of senses where little was tagged.
	tagged := func(k lemmaKey) int {
		n := len(wn.index[k])
		for _, c := range wn.counts[k] {
			n += c
		}
		return n
	}
	for t, ks := range byTerm {
		most := 0
		for _, k := range ks {
			most = max(most, tagged(k))
		}
		for _, k := range ks {
			lw := max(minLemmaWgt, math.Sqrt(float64(tagged(k))/float64(most)))
			for rank, off := range wn.index[k] {
				if rank == maxSenses {
					break
				}
				s := wn.synsets[synKey{k.pos, off}]
				if s == nil {
					continue
				}
				self := 0
				for i, wd := range s.words {
					if strings.ToLower(wd.lemma) == k.lemma {
						self = i + 1
						break
					}
				}
				base := lw * b.senseWeight(k, rank)
				b.addWords(t, s, self, wSynonym*base, famNear)
				for _, p := range s.pointers {
					dst := wn.synsets[synKey{p.pos, p.offset}]
					if dst == nil {
						continue
					}
					switch p.symbol {
					case "+":
						if p.src == self && p.dst >= 1 && p.dst <= len(dst.words) {
							wd := dst.words[p.dst-1].lemma
							b.add(t, b.term(wd), wDerived*base*b.targetWeight(wd, dst, famNear))
						}
					case "&", "$":
						b.addWords(t, dst, 0, wSimilar*base, famNear)
					case "@", "@i":
						if k.pos == 'n' || k.pos == 'v' {
							b.addWords(t, dst, 0, wHypernym*base, famUp)
						}
					case "~", "~i":
						if rank < maxHypoOf {
							b.addWords(t, dst, 0, wHyponym*base, famHypon)
						}
					}
				}
			}
		}
	}
	out := make(map[string][]related, len(b.rel))
	for t, m := range b.rel {
		rs := make([]related, 0, len(m))
		for u, w := range m {
			rs = append(rs, related{u, int(math.Round(w * 100))})
		}
		slices.SortFunc(rs, func(a, b related) int {
			if a.pct != b.pct {
				return b.pct - a.pct
			}
			return strings.Compare(a.term, b.term)
		})
		if len(rs) > maxRelated {
			rs = rs[:maxRelated]
		}
		out[t] = rs
	}
	return out
}

// related is one output relation, its weight in hundredths.
type related struct {
	term string
	pct  int
}

// write writes the relations in the format discovery/thesaurus reads:
// gzip'd lines "term related:pct related:pct ...", terms in order,
// related terms best first, weights in hundredths.
func write(path string, rel map[string][]related) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("thesaurusgen: %w", err)
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("thesaurusgen: %w", err)
	}
	fmt.Fprintf(zw, "# Related terms from WordNet 3.0 (see WORDNET-LICENSE), written by internal/thesaurusgen.\n")
	terms := make([]string, 0, len(rel))
	for t := range rel {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	var sb strings.Builder
	for _, t := range terms {
		sb.Reset()
		sb.WriteString(t)
		for _, r := range rel[t] {
			fmt.Fprintf(&sb, " %s:%d", r.term, r.pct)
		}
		sb.WriteByte('\n')
		if _, err := zw.Write([]byte(sb.String())); err != nil {
			return fmt.Errorf("thesaurusgen: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("thesaurusgen: %w", err)
	}
	return f.Close()
}
