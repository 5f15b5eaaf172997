package discovery

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/toolplane/toolplane/registry"
)

// The fields of a tool's text a search reads, and what a word found in
// each weighs against the same word in the description. A name or a
// title says what the tool is; tags and hints are chosen words; a
// parameter's words say what it takes, which a query names less often.
const (
	fieldName = iota
	fieldTitle
	fieldTags
	fieldHints
	fieldDescription
	fieldParams
	numFields
)

var fieldWeight = [numFields]float64{
	fieldName:        3.0,
	fieldTitle:       2.5,
	fieldTags:        1.5,
	fieldHints:       2.0,
	fieldDescription: 1.0,
	fieldParams:      0.5,
}

// fieldB is BM25's length normalisation per field: a long description
// says less per word than a short one; a name's length says little.
var fieldB = [numFields]float64{
	fieldName:        0.3,
	fieldTitle:       0.3,
	fieldTags:        0.2,
	fieldHints:       0.5,
	fieldDescription: 0.75,
	fieldParams:      0.75,
}

// maxFieldTerms bounds the words of one field of one tool that are kept:
// a description padded to rank for everything is read only so far.
const maxFieldTerms = 400

// doc is one tool version as the index holds it: the version, and its
// analysed text.
type doc struct {
	tool *registry.Tool
	*text
}

// text is the analysed text of one tool version: per field, each word's
// count and the field's length. It depends on the version's words alone,
// so it is computed once (when the registry first serves the version)
// and shared by every search whose caller may call it, and by the
// version's later copies in the registry (a catalogue reload rebuilds
// every published version's Tool, with the same words).
type text struct {
	// rel caches each word's related words (see relatedOf), per text:
	// a cache shared by every tool would let the time one caller's
	// first search takes tell of words in tools it may not call.
	relMu sync.Mutex
	rel   map[string][]Related

	tf    map[string]*[numFields]uint16
	len   [numFields]int
	name  []string // the name's words, in order
	words int      // distinct words
}

// textKey names the words of a version: everything analyse reads.
func textKey(t *registry.Tool) string {
	d := &t.Def
	var b strings.Builder
	for _, s := range []string{d.Name, d.Version, d.SchemaHash, t.Model, d.Title, d.Description} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	for _, s := range d.Tags {
		b.WriteString(s)
		b.WriteByte(1)
	}
	b.WriteByte(0)
	for _, s := range d.SearchHints {
		b.WriteString(s)
		b.WriteByte(1)
	}
	b.WriteByte(0)
	b.Write(d.InputSchema)
	return b.String()
}

// analyse reads a tool's text.
func analyse(t *registry.Tool) *text {
	d := &text{tf: make(map[string]*[numFields]uint16, 64)}
	add := func(f int, text string) {
		for _, w := range Terms(text) {
			if d.len[f] >= maxFieldTerms {
				return
			}
			c := d.tf[w]
			if c == nil {
				c = new([numFields]uint16)
				d.tf[w] = c
			}
			c[f]++
			d.len[f]++
		}
	}
	def := &t.Def
	add(fieldName, t.Model)
	d.name = Terms(t.Model)
	add(fieldTitle, def.Title)
	for _, tag := range def.Tags {
		add(fieldTags, tag)
	}
	for _, h := range def.SearchHints {
		add(fieldHints, h)
	}
	add(fieldDescription, def.Description)
	params(def.InputSchema, func(s string) { add(fieldParams, s) })
	d.words = len(d.tf)
	return d
}

// relatedOf answers related(w), remembered for this text.
func (t *text) relatedOf(w string, related func(string) []Related) []Related {
	t.relMu.Lock()
	defer t.relMu.Unlock()
	if r, ok := t.rel[w]; ok {
		return r
	}
	if t.rel == nil {
		t.rel = make(map[string][]Related, len(t.tf))
	}
	r := related(w)
	t.rel[w] = r
	return r
}

// params calls fn with the words of an input schema a search reads: each
// property's name, description, title, enumerated values and examples,
// nested properties included (to a depth of four).
func params(raw json.RawMessage, fn func(string)) {
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil {
		return
	}
	var walk func(m map[string]any, depth int)
	walk = func(m map[string]any, depth int) {
		if depth > 4 {
			return
		}
		for _, k := range []string{"description", "title"} {
			if v, ok := m[k].(string); ok {
				fn(v)
			}
		}
		for _, k := range []string{"enum", "examples"} {
			if vs, ok := m[k].([]any); ok {
				for _, v := range vs {
					if s, ok := v.(string); ok {
						fn(s)
					}
				}
			}
		}
		if props, ok := m["properties"].(map[string]any); ok {
			names := make([]string, 0, len(props))
			for name := range props {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				fn(name)
				if p, ok := props[name].(map[string]any); ok {
					walk(p, depth+1)
				}
			}
		}
		if items, ok := m["items"].(map[string]any); ok {
			walk(items, depth+1)
		}
	}
	walk(s, 0)
}

// corpus holds the doc of every version the registry serves, swapped
// whole when the registry changes.
type corpus struct {
	mu   sync.RWMutex
	docs map[*registry.Tool]*doc
	// texts are the analysed texts by textKey.
	texts map[string]*text
}

// doc answers t's doc, analysing it when the registry has not yet been
// followed to it (a search that races a publish).
func (c *corpus) doc(t *registry.Tool) *doc {
	c.mu.RLock()
	d := c.docs[t]
	c.mu.RUnlock()
	if d != nil {
		return d
	}
	d = &doc{tool: t, text: analyse(t)}
	c.mu.Lock()
	if c.docs == nil {
		c.docs = map[*registry.Tool]*doc{}
	}
	if e := c.docs[t]; e != nil {
		d = e
	} else {
		c.docs[t] = d
	}
	c.mu.Unlock()
	return d
}

// reset makes the corpus every version of ts, keeping the docs of those it
// held already and analysing the rest.
func (c *corpus) reset(ts []*registry.Tool) {
	c.mu.RLock()
	old, oldTexts := c.docs, c.texts
	c.mu.RUnlock()
	next := make(map[*registry.Tool]*doc, len(ts))
	texts := make(map[string]*text, len(ts))
	for _, t := range ts {
		if d := old[t]; d != nil {
			next[t] = d
			continue
		}
		k := textKey(t)
		x := texts[k]
		if x == nil {
			x = oldTexts[k]
		}
		if x == nil {
			x = analyse(t)
		}
		texts[k] = x
		next[t] = &doc{tool: t, text: x}
	}
	for t, d := range next {
		if _, ok := old[t]; ok {
			texts[textKey(t)] = d.text
		}
	}
	c.mu.Lock()
	c.docs, c.texts = next, texts
	c.mu.Unlock()
}

// size answers how many versions the corpus holds.
func (c *corpus) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.docs)
}

// oneLine answers the first sentence of a description, at most 160
// bytes: what a list of matches shows of each.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if len(s) > 160 {
		cut := 157
		for cut > 0 && (s[cut]&0xC0) == 0x80 {
			cut--
		}
		s = strings.TrimSpace(s[:cut]) + "…"
	}
	return s
}
