package discovery

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/semver"
)

// Query is one search: words, filters, and how many matches to answer.
// Every filter is optional; set filters must all hold.
type Query struct {
	// Text is what the caller wants done, in its own words; only its first
	// MaxQueryBytes are read. Empty lists the candidates the filters
	// keep, by name.
	Text string
	// Tags keeps tools holding every one of these tags.
	Tags []string
	// Effect keeps tools of this effect (read, write, send).
	Effect toolplane.Effect
	// Owner keeps tools of this owning team.
	Owner string
	// State keeps versions in this state (active, deprecated).
	State toolplane.VersionState
	// Versions keeps versions inside this range (^2.0.0).
	Versions string
	// Classification keeps tools touching this data classification.
	Classification string
	// Limit is how many matches to answer: DefaultLimit when zero, at
	// most MaxLimit.
	Limit int
}

// The bounds of a search's answer.
const (
	DefaultLimit = 10
	MaxLimit     = 50
)

// Results is a search's answer.
type Results struct {
	// Matches are the best candidates, best first.
	Matches []Match `json:"matches"`
	// NoGoodMatch says no candidate matched the query well enough to be
	// worth showing: Matches then holds none. The words a caller used
	// are not the catalogue's, or what it wants is not there.
	NoGoodMatch bool `json:"no_good_match,omitempty"`
	// Total is how many candidates matched, before Limit.
	Total int `json:"total"`
	// Degraded names a signal that could not be used this time (the
	// embeddings endpoint did not answer in time): the answer is the
	// rest's.
	Degraded string `json:"degraded,omitempty"`
}

// Match is one tool a search found.
type Match struct {
	// Name is the platform name, Model the name a model calls it by.
	Name    string `json:"name"`
	Model   string `json:"model_name"`
	Version string `json:"version"`
	Title   string `json:"title,omitempty"`
	// Summary is the description's first sentence.
	Summary string                 `json:"summary"`
	Effect  toolplane.Effect       `json:"effect"`
	State   toolplane.VersionState `json:"state"`
	Tags    []string               `json:"tags,omitempty"`
	// Score orders the matches of one search: the best is 1, the others
	// a share of it. It means nothing across searches.
	Score float64 `json:"score"`
	// Why says what matched: "name", "title", "tags", "hints",
	// "description", "parameters", "related words", "semantic".
	Why []string `json:"why_matched,omitempty"`
	// Replacement, on a deprecated version, is what replaces it
	// ("name@range"), when the caller may call that.
	Replacement string `json:"replacement,omitempty"`
	// Requires are the tools whose output this one takes, and PairsWith
	// those usually called beside it: the edges of the dependency graph
	// to tools the caller may call.
	Requires  []string `json:"requires_output_of,omitempty"`
	PairsWith []string `json:"commonly_paired_with,omitempty"`
	// Health, when known, is how the tool's recent calls went, 1 for
	// all well, 0 for none answering (an open breaker).
	Health *float64 `json:"health,omitempty"`

	// Tool is the version found.
	Tool *registry.Tool `json:"-"`
}

// Thesaurus answers words related to a word, each with how close it is
// (1 for a synonym as good as the word itself). Words are analysed terms
// (see Terms).
type Thesaurus interface {
	Related(term string) []Related
}

// Related is one word a thesaurus relates to another.
type Related struct {
	Term   string
	Weight float64
}

// Semantic scores candidates by meaning, through an embeddings model:
// the optional signal fused with the words'.
type Semantic interface {
	// Similar answers, for each candidate, how close its meaning is to
	// text (cosine similarity, or NaN where the candidate has no vector
	// yet). It may be slow or fail: the search bounds it and goes on
	// without it.
	Similar(ctx context.Context, text string, candidates []*registry.Tool) ([]float64, error)
}

// Signals are what ranking reads of a tool besides its text.
type Signals interface {
	// Health answers how the tool's recent calls in org went, from 1 (all
	// well) to 0 (failing, or its breaker open); ok false when nothing is
	// known.
	Health(org, name string) (h float64, ok bool)
	// Popularity answers how much org uses the tool, from 0 to 1.
	Popularity(org, name string) float64
}

// Options configure an Index. Every field is optional.
type Options struct {
	// Thesaurus widens a query's words to related ones; nil uses none.
	Thesaurus Thesaurus
	// Semantic, when set, is fused with the words' ranking.
	Semantic Semantic
	// SemanticTimeout bounds Semantic (default 300ms): past it the
	// search answers from the words alone, and says so.
	SemanticTimeout time.Duration
	// Signals, when set, lower a failing tool and raise a used one.
	Signals Signals
	// AnswerAll turns the no-good-match answer off: every search then
	// answers its best candidates however weakly they match (the
	// evaluation reads the ranking so).
	AnswerAll bool
	// CachedSets bounds the candidate sets kept built (default 256).
	CachedSets int
}

// Index is a node's search read model: the analysed text of every version
// the registry serves, and the indexes of recent callers' candidates.
type Index struct {
	opt    Options
	corpus corpus
	sets   *sets
	// mu serialises rebuilds, so the corpus and the cleared sets are
	// those of one catalogue.
	mu sync.Mutex
}

// New answers an empty index.
func New(opt Options) *Index {
	if opt.SemanticTimeout <= 0 {
		opt.SemanticTimeout = 300 * time.Millisecond
	}
	if opt.CachedSets <= 0 {
		opt.CachedSets = 256
	}
	return &Index{opt: opt, sets: newSets(opt.CachedSets)}
}

// Follow indexes every version reg serves now and after each change,
// until stop is called: the index each node keeps current from the
// registry, which itself follows the catalogue's revisions.
func (x *Index) Follow(reg *registry.Registry) (stop func()) {
	stop = reg.Watch(func() { x.Rebuild(reg.Every()) })
	x.Rebuild(reg.Every())
	return stop
}

// Rebuild makes the index hold exactly ts: their text is analysed (the
// versions it held already, and new copies of the same texts, are kept as
// they were). A caller's set is built again only when its candidates'
// texts changed.
func (x *Index) Rebuild(ts []*registry.Tool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.corpus.reset(ts)
}

// Size answers how many versions the index holds.
func (x *Index) Size() int { return x.corpus.size() }

// docRelated answers the related words a tool's word is indexed under
// besides itself: the closest few.
func (x *Index) docRelated(w string) []Related {
	var r []Related
	for _, c := range x.opt.Thesaurus.Related(w) {
		if c.Term != w && c.Weight >= tune.docRelMin && len(r) < tune.docRelMax {
			r = append(r, c)
		}
	}
	return r
}

// set answers the built set of candidates, bound to them: its docs are
// theirs (the caller gives them back with putDocs when done).
func (x *Index) set(candidates []*registry.Tool) *set {
	docs := getDocs(len(candidates))
	for i, t := range candidates {
		docs[i] = x.corpus.doc(t)
	}
	var related func(string) []Related
	if x.opt.Thesaurus != nil {
		related = x.docRelated
	}
	k := x.sets.key(docs)
	built := x.sets.build(k, docs, func() *set { return newSet(docs, related) })
	return &set{docs: docs, post: built.post, rel: built.rel, byName: built.byName}
}

var docsPool sync.Pool

func getDocs(n int) []*doc {
	if p, _ := docsPool.Get().(*[]*doc); p != nil && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]*doc, n)
}

func putDocs(d []*doc) {
	clear(d)
	docsPool.Put(&d)
}

// group is one word of a query with the words standing in for it.
type group struct {
	word  string
	terms []Related
	// share is the word's share of what a good match must cover: how
	// rare it is among the candidates, or, for a word none of them holds
	// (nor any word standing in for it), as rare as can be when the
	// language knows it (what a query about something the catalogue
	// lacks looks like) and nothing when it does not (an order number,
	// an address, a name: the request's particulars, not its point).
	share float64
	// cap is the most a related word of it may weigh: the word's own
	// idf when candidates hold it.
	cap float64
}

// Search answers the candidates that best match q. candidates are the
// versions the caller may call (door.Door.Shown): nothing else is read.
// org is the caller's organization, for the signals.
func (x *Index) Search(ctx context.Context, org string, candidates []*registry.Tool, q Query) (*Results, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	s := x.set(candidates)
	defer putDocs(s.docs)
	keep := x.filter(s, q)
	res := &Results{Matches: []Match{}}
	text := strings.TrimSpace(clip(q.Text))
	groups := x.groups(s, text)
	if len(groups) == 0 && text != "" {
		// Words, but none a search reads ("what is it", "???"): nothing
		// matches them.
		res.NoGoodMatch = true
		return res, nil
	}
	if len(groups) == 0 {
		// No words: the filtered candidates by name.
		var idx []int
		for i := range s.docs {
			if keep == nil || keep[i] {
				idx = append(idx, i)
			}
		}
		res.Total = len(idx)
		sort.Slice(idx, func(a, b int) bool { return s.docs[idx[a]].tool.Def.Name < s.docs[idx[b]].tool.Def.Name })
		for _, i := range idx[:min(limit, len(idx))] {
			res.Matches = append(res.Matches, x.match(org, s, i, 0, nil))
		}
		return res, nil
	}
	N := len(s.docs)
	sc := getScratch(N)
	defer putScratch(sc)
	score, cover, why, gv, gw, gwhy, touched := sc.score, sc.cover, sc.why, sc.gv, sc.gw, sc.gwhy, sc.touched[:0]
	var total float64
	// gather keeps, per candidate, the best of a word's stand-ins: w
	// times the posting's weight, close saying how near the stand-in is
	// to the query's word.
	var gather func(ps []posting, w float64, related bool)
	var close float64
	gather = func(ps []posting, w float64, related bool) {
		for _, p := range ps {
			if keep != nil && !keep[p.doc] {
				continue
			}
			v := w * float64(p.w)
			if gv[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			if v > gv[p.doc] {
				gv[p.doc], gw[p.doc] = v, close
				gwhy[p.doc] = p.fields
				if related {
					gwhy[p.doc] |= whyRelated
				}
			}
		}
	}
	for _, g := range groups {
		total += g.share
		for _, r := range g.terms {
			ps := s.post[r.Term]
			if len(ps) == 0 {
				continue
			}
			// A related word weighs at most what the query's own word
			// would: a rare stand-in never outranks the word itself.
			w := math.Min(idf(len(ps), N), g.cap) * r.Weight
			close = r.Weight
			gather(ps, w, r.Weight < 1)
		}
		for _, r := range g.terms[:min(len(g.terms), tune.relTerms)] {
			// Tools holding a word related to this one: weaker still.
			// A word many candidates relate to says little and costs a
			// long walk: it is passed over.
			ps := s.rel[r.Term]
			if len(ps) == 0 || (len(ps) > relFloor && float64(len(ps)) > tune.relShare*float64(N)) {
				continue
			}
			w := math.Min(idf(len(ps)+len(s.post[r.Term]), N), g.cap) * r.Weight * tune.docRelWeight
			close = r.Weight * tune.docRelWeight
			gather(ps, w, true)
		}
		for _, d := range touched {
			score[d] += gv[d]
			// A related word covers the word's share in proportion to
			// how close it is.
			cover[d] += g.share * gw[d]
			why[d] |= gwhy[d]
			gv[d], gw[d], gwhy[d] = 0, 0, 0
		}
		touched = touched[:0]
	}
	sc.touched = touched
	lexical := sc.lexical[:0]
	for i := range N {
		if score[i] > 0 {
			lexical = append(lexical, i)
			if total > 0 {
				cover[i] /= total
			}
		}
	}
	sc.lexical = lexical
	// The rankings fused: the words', and an embeddings model's when
	// one is configured.
	lists := []ranking{{idx: top(s, lexical, score, fuseDepth), weight: 1}}
	sem, degraded := x.semantic(ctx, text, s, keep)
	res.Degraded = degraded
	if sem != nil {
		lists = append(lists, ranking{idx: top(s, above(sem, SemanticMinSimilarity, sc), sem, fuseDepth), weight: 1})
	}
	var fused []float64
	var idx []int
	if len(lists) == 1 {
		// The words' ranking alone: its own scores order it.
		fused, idx = sc.fused, lexical
		copy(fused, score)
	} else {
		fused, idx = fuse(lists, sc)
	}
	for _, i := range idx {
		fused[i] *= x.signal(org, s.docs[i].tool)
	}
	// Total counts every candidate a ranking holds, not only the places
	// fusion read.
	res.Total = len(lexical)
	for i, v := range sem {
		if v >= SemanticMinSimilarity && score[i] == 0 {
			res.Total++
		}
	}
	// Only the first places are ordered: a replacement moved up is taken
	// from wherever it was.
	idx = top(s, idx, fused, limit+8)
	idx, moved := replacementsFirst(s, idx, fused, keep)
	res.Total += moved
	if len(idx) == 0 || (!x.opt.AnswerAll && !good(s, idx, groups, cover, sem)) {
		res.NoGoodMatch = true
		res.Total = 0
		return res, nil
	}
	best := fused[idx[0]]
	for _, i := range idx[:min(limit, len(idx))] {
		// A score is relative to the best match of this search (1).
		rel := 0.0
		if best > 0 {
			rel = fused[i] / best
		}
		m := x.match(org, s, i, rel, whyNames(why[i], sem != nil && sem[i] >= SemanticMinSimilarity))
		res.Matches = append(res.Matches, m)
	}
	return res, nil
}

// good reports whether one of the first five matches is worth an
// answer: it names what the query asks for (its name, past the
// namespace, is the query's words: a verb and an object, whatever else
// the query adds), or it covers the query's words, or the two together
// come near; or an embeddings model finds it close in meaning. The
// thresholds were calibrated on the evaluation's tuning half: below them
// a match is, as good as always, one that does not answer the query.
func good(s *set, idx []int, groups []group, cover, sem []float64) bool {
	qw := queryWords(groups)
	for _, i := range idx[:min(5, len(idx))] {
		name := nameCover(s.docs[i], qw)
		if name >= tune.goodName || cover[i] >= tune.goodCover || name+cover[i] >= tune.goodSum || (sem != nil && sem[i] >= SemanticMinSimilarity) {
			return true
		}
	}
	return false
}

// groups analyses a query into its words, each widened by the thesaurus,
// at most maxQueryTerms of them.
func (x *Index) groups(s *set, text string) []group {
	if text == "" {
		return nil
	}
	terms, w := termsAndWords(text)
	names := properNames(text)
	seen := map[string]bool{}
	var out []group
	N := len(s.docs)
	for i, t := range terms {
		if seen[t] || len(out) == maxQueryTerms {
			continue
		}
		seen[t] = true
		g := group{word: t, terms: []Related{{Term: t, Weight: 1}}}
		if x.opt.Thesaurus != nil {
			for _, r := range x.opt.Thesaurus.Related(t) {
				if r.Term != t && r.Weight > 0 && r.Weight <= 1 && len(g.terms) < 24 {
					g.terms = append(g.terms, r)
				}
			}
		}
		df := len(s.post[t])
		g.cap = math.Inf(1)
		if df > 0 {
			g.cap = idf(df, N)
		}
		if df == 0 {
			for _, r := range g.terms[1:] {
				if n := len(s.post[r.Term]); n > 0 && (df == 0 || n < df) {
					df = n
				}
			}
		}
		g.share = idf(df, N)
		if (df == 0 && (!knows(w[i]) || names[w[i]])) || filler[w[i]] {
			g.share = 0
		}
		out = append(out, g)
	}
	return out
}

// The bits of what matched, in Match.Why order.
const (
	whyName uint8 = 1 << iota
	whyTitle
	whyTags
	whyHints
	whyDescription
	whyParams
	whyRelated
)

var whyWords = []string{"name", "title", "tags", "hints", "description", "parameters", "related words"}

func whyNames(b uint8, semantic bool) []string {
	var out []string
	for i, w := range whyWords {
		if b&(1<<i) != 0 {
			out = append(out, w)
		}
	}
	if semantic {
		out = append(out, "semantic")
	}
	return out
}

// filter answers which candidates q's filters keep (nil: all).
func (x *Index) filter(s *set, q Query) []bool {
	if len(q.Tags) == 0 && q.Effect == "" && q.Owner == "" && q.State == "" && q.Versions == "" && q.Classification == "" {
		return nil
	}
	var rng semver.Range
	if q.Versions != "" {
		rng, _ = semver.ParseRange(q.Versions) // checked by q.check
	}
	keep := make([]bool, len(s.docs))
	for i, d := range s.docs {
		def := &d.tool.Def
		ok := (q.Effect == "" || def.Effect == q.Effect) &&
			(q.Owner == "" || strings.EqualFold(def.Owner, q.Owner)) &&
			(q.State == "" || d.tool.State == q.State) &&
			(q.Classification == "" || strings.EqualFold(def.Classification, q.Classification))
		for _, tag := range q.Tags {
			if !ok {
				break
			}
			ok = slices.ContainsFunc(def.Tags, func(t string) bool { return strings.EqualFold(t, tag) })
		}
		if ok && q.Versions != "" {
			v, err := semver.Parse(def.Version)
			ok = err == nil && rng.Contains(v)
		}
		keep[i] = ok
	}
	return keep
}

// check refuses a query no search can answer, saying why.
func (q Query) check() error {
	if q.Limit < 0 {
		return fmt.Errorf("%w: limit %d: give 1 to %d", toolplane.ErrInvalid, q.Limit, MaxLimit)
	}
	switch q.Effect {
	case "", toolplane.EffectRead, toolplane.EffectWrite, toolplane.EffectSend:
	default:
		return fmt.Errorf("%w: effect %q: give read, write or send", toolplane.ErrInvalid, toolplane.Clip(string(q.Effect)))
	}
	switch q.State {
	case "", toolplane.StateActive, toolplane.StateDeprecated:
	default:
		return fmt.Errorf("%w: state %q: give active or deprecated (only those are called)", toolplane.ErrInvalid, toolplane.Clip(string(q.State)))
	}
	if q.Versions != "" {
		if _, err := semver.ParseRange(q.Versions); err != nil {
			return fmt.Errorf("%w: version range %q is not a range: give one such as ^2.1.0, ~2.1.0 or 2.1.0", toolplane.ErrInvalid, toolplane.Clip(q.Versions))
		}
	}
	if len(q.Tags) > 16 {
		return fmt.Errorf("%w: %d tags: give at most 16", toolplane.ErrInvalid, len(q.Tags))
	}
	return nil
}

// signal answers the factor ranking multiplies a match's relevance by:
// a deprecated version gives way, a failing tool sinks, a used one rises
// a little.
func (x *Index) signal(org string, t *registry.Tool) float64 {
	f := 1.0
	if t.State == toolplane.StateDeprecated {
		f *= 0.8
	}
	if x.opt.Signals != nil {
		if h, ok := x.opt.Signals.Health(org, t.Def.Name); ok {
			f *= 0.4 + 0.6*math.Max(0, math.Min(1, h))
		}
		f *= 1 + 0.1*math.Max(0, math.Min(1, x.opt.Signals.Popularity(org, t.Def.Name)))
	}
	return f
}

// replacementsFirst moves every deprecated candidate's replacement, when
// the caller may call it, above it: a deprecated version never outranks
// what replaces it, even when the replacement matched the words less well
// or not at all.
func replacementsFirst(s *set, idx []int, score []float64, keep []bool) ([]int, int) {
	moved := 0
	pos := make(map[int]int, len(idx))
	for p, i := range idx {
		pos[i] = p
	}
	for p := 0; p < len(idx); p++ {
		t := s.docs[idx[p]].tool
		name, rng := t.ReplacementRef()
		if name == "" || name == t.Def.Name {
			continue
		}
		r, ok := s.byName[name]
		if !ok || (keep != nil && !keep[r]) || !contains(s.docs[r].tool, rng) || s.docs[r].tool.State == toolplane.StateDeprecated {
			continue
		}
		if q, ok := pos[r]; ok && q < p {
			continue
		}
		// Take the replacement out of where it was (if anywhere) and put
		// it just above the deprecated version.
		if q, ok := pos[r]; ok {
			idx = append(idx[:q], idx[q+1:]...)
		} else if score[r] == 0 {
			moved++ // it matched nothing: Total did not count it
		}
		idx = append(idx[:p], append([]int{r}, idx[p:]...)...)
		score[r] = math.Max(score[r], score[idx[p+1]])
		for i, d := range idx {
			pos[d] = i
		}
		p++
	}
	return idx, moved
}

// contains reports whether t's version is in rng ("" is any).
func contains(t *registry.Tool, rng string) bool {
	if rng == "" || rng == "*" {
		return true
	}
	r, err := semver.ParseRange(rng)
	if err != nil {
		return false
	}
	v, err := semver.Parse(t.Def.Version)
	return err == nil && r.Contains(v)
}

// match answers candidate i as a Match, with its edges to other
// candidates.
func (x *Index) match(org string, s *set, i int, score float64, why []string) Match {
	t := s.docs[i].tool
	m := Match{Name: t.Def.Name, Model: t.Model, Version: t.Def.Version, Title: t.Def.Title, Summary: oneLine(t.Def.Description),
		Effect: t.Def.Effect, State: t.State, Tags: t.Def.Tags, Score: math.Round(score*1000) / 1000, Why: why, Tool: t}
	if name, _ := t.ReplacementRef(); name != "" {
		if _, ok := s.byName[name]; ok || name == t.Def.Name {
			m.Replacement = t.Replacement
			if name == t.Def.Name && !strings.Contains(t.Replacement, "@") {
				m.Replacement = name + "@" + t.Replacement
			}
		}
	}
	for _, dep := range t.Def.Dependencies {
		name, rng := semver.SplitRef(dep.Tool)
		j, ok := s.byName[name]
		if !ok || name == t.Def.Name || !contains(s.docs[j].tool, rng) {
			continue
		}
		switch dep.Relation {
		case toolplane.RequiresOutputOf:
			m.Requires = append(m.Requires, name)
		case toolplane.CommonlyPairedWith:
			m.PairsWith = append(m.PairsWith, name)
		}
	}
	if x.opt.Signals != nil {
		if h, ok := x.opt.Signals.Health(org, t.Def.Name); ok {
			m.Health = &h
		}
	}
	return m
}

// SemanticMinSimilarity is the cosine similarity from which a semantic
// neighbour counts as a match on its own (when no word of the query
// matched it) and a query is answered on meaning alone.
const SemanticMinSimilarity = 0.5

// rrfK is reciprocal rank fusion's constant: a rank's weight is
// 1/(rrfK+rank), so the first places of either list count, and no one
// list's raw scores swamp the other's.
const rrfK = 60

// semantic answers each candidate's similarity to text, or nil and why
// not when the signal is off, failed or took longer than its bound.
func (x *Index) semantic(ctx context.Context, text string, s *set, keep []bool) ([]float64, string) {
	if x.opt.Semantic == nil || text == "" {
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, x.opt.SemanticTimeout)
	defer cancel()
	ts := make([]*registry.Tool, len(s.docs))
	for i, d := range s.docs {
		ts[i] = d.tool
	}
	type answer struct {
		sim []float64
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		sim, err := x.opt.Semantic.Similar(ctx, text, ts)
		ch <- answer{sim, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil || len(a.sim) != len(ts) {
			return nil, "semantic"
		}
		for i, v := range a.sim {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < -1.0001 || v > 1.0001 || (keep != nil && !keep[i]) {
				a.sim[i] = 0
			}
		}
		return a.sim, ""
	case <-ctx.Done():
		return nil, "semantic"
	}
}

// ranking is one ordered list of candidates and its weight in the
// fusion.
type ranking struct {
	idx    []int
	weight float64
}

// relFloor is the length of a related word's list that is always
// walked, however few the candidates: the walk is cheap, and among a few
// tools every related word is held by a large share of them.
const relFloor = 64

// fuseDepth is how far down each ranking fusion reads.
const fuseDepth = 100

// tune holds the constants ranking and the no-good-match answer were
// calibrated to on the evaluation's tuning half (internal/discoveryeval).
var tune = struct {
	// docRelMin and docRelMax bound the related words a tool's word is
	// indexed under (the closest, at least this close), and
	// docRelWeight is what a match through them weighs against one of
	// the query's own related words.
	docRelMin    float64
	docRelMax    int
	docRelWeight float64
	// relTerms is how many of a query word's stand-ins (the word first)
	// are looked up among the tools' related words: each costs a walk
	// of a long list.
	relTerms int
	// relShare is the share of the candidates above which a related
	// word's list is not walked.
	relShare float64
	// A match is good from goodName of its name named, goodCover of the
	// query's words covered, or goodSum of the two (see good).
	goodName, goodCover, goodSum float64
}{docRelMin: 0.4, docRelMax: 12, docRelWeight: 0.8, relTerms: 24, relShare: 0.1, goodName: 0.65, goodCover: 0.5, goodSum: 1.1}

// fuse merges rankings by weighted reciprocal rank fusion: each list adds
// weight/(rrfK+rank) for each candidate it holds, so the first places of
// any list count, and no list's raw scores swamp another's. It answers
// the fused values (indexed by candidate) and the candidates any list
// holds.
func fuse(lists []ranking, sc *scratch) ([]float64, []int) {
	fused := sc.fused
	out := sc.fusedIdx[:0]
	for _, l := range lists {
		for r, i := range l.idx {
			if fused[i] == 0 {
				out = append(out, i)
				sc.fusedIdx = out
			}
			fused[i] += l.weight / float64(rrfK+r+1)
		}
	}
	return fused, out
}

// filler are the words of a request's manner rather than its matter
// ("please", "I want to", "can you quickly"): a match need not cover
// them, though a tool holding one still matches it.
var filler = map[string]bool{
	"please": true, "pls": true, "plz": true, "kindly": true, "want": true, "wanna": true, "wants": true, "wanted": true,
	"need": true, "needs": true, "needed": true, "like": true, "love": true, "hey": true, "hi": true, "hello": true,
	"thanks": true, "thank": true, "thx": true, "just": true, "quick": true, "quickly": true, "asap": true,
	"also": true, "actually": true, "really": true, "maybe": true, "perhaps": true, "somehow": true,
	"someone": true, "somebody": true, "something": true, "anything": true, "everything": true,
	"thing": true, "things": true, "stuff": true, "able": true, "let": true, "lets": true, "let's": true,
	"could": true, "would": true, "can": true, "go": true, "ahead": true, "try": true, "trying": true,
	"i'd": true, "i'm": true, "we'd": true, "we're": true, "you": true, "me": true, "us": true,
}

// properNames answers the words of text written with a capital where a
// sentence does not begin (Okta, Friday, Leeds, Maria), lower case: the
// names a request carries, which a tool's text need not hold to answer
// it.
func properNames(text string) map[string]bool {
	names := map[string]bool{}
	start := true
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return unicode.IsSpace(r) }) {
		first, _ := utf8.DecodeRuneInString(f)
		if !start && unicode.IsUpper(first) {
			for _, w := range Words(f) {
				names[w] = true
			}
		}
		start = strings.ContainsAny(f[len(f)-1:], ".!?;:")
	}
	return names
}

// knows reports whether a query's word is a word rather than a
// particular of the request (a number, an address, an id): only then does
// a match need to cover it.
func knows(word string) bool {
	for _, r := range word {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// above answers the candidates whose value in v is at least min.
func above(v []float64, min float64, sc *scratch) []int {
	var out []int
	for i, x := range v {
		if x >= min {
			out = append(out, i)
		}
	}
	return out
}

// top answers the k best of idx by score (then name), ordered; the rest
// are dropped. A deprecated version's replacement among the dropped is
// found again by replacementsFirst, which reads the whole set.
func top(s *set, idx []int, score []float64, k int) []int {
	better := func(a, b int) bool {
		if score[a] != score[b] {
			return score[a] > score[b]
		}
		return s.docs[a].tool.Def.Name < s.docs[b].tool.Def.Name
	}
	if len(idx) > 4*k {
		// Keep a bounded heap of the k best (the worst at its root).
		h := make([]int, 0, k)
		down := func(i int) {
			for {
				l, m := 2*i+1, i
				if l < len(h) && better(h[m], h[l]) {
					m = l
				}
				if r := l + 1; r < len(h) && better(h[m], h[r]) {
					m = r
				}
				if m == i {
					return
				}
				h[i], h[m] = h[m], h[i]
				i = m
			}
		}
		for _, i := range idx {
			if len(h) < k {
				h = append(h, i)
				for j := len(h) - 1; j > 0; {
					p := (j - 1) / 2
					if !better(h[p], h[j]) {
						break
					}
					h[p], h[j] = h[j], h[p]
					j = p
				}
				continue
			}
			if better(i, h[0]) {
				h[0] = i
				down(0)
			}
		}
		idx = h
	}
	sort.Slice(idx, func(a, b int) bool { return better(idx[a], idx[b]) })
	if len(idx) > k {
		idx = idx[:k]
	}
	return idx
}

// scratch is the per-candidate working memory of one search, pooled: a
// search over ten thousand candidates would otherwise allocate a few
// hundred kilobytes each time.
type scratch struct {
	score, cover, gv, gw, fused []float64
	lexical, fusedIdx           []int
	why, gwhy                   []uint8
	touched                     []int32
}

var scratchPool sync.Pool

func getScratch(n int) *scratch {
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil || cap(sc.score) < n {
		return &scratch{score: make([]float64, n), cover: make([]float64, n), gv: make([]float64, n), gw: make([]float64, n),
			fused: make([]float64, n),
			why:   make([]uint8, n), gwhy: make([]uint8, n), touched: make([]int32, 0, 256)}
	}
	sc.score, sc.cover, sc.gv, sc.gw = sc.score[:n], sc.cover[:n], sc.gv[:n], sc.gw[:n]
	sc.fused = sc.fused[:n]
	clear(sc.fused)
	sc.why, sc.gwhy = sc.why[:n], sc.gwhy[:n]
	clear(sc.score)
	clear(sc.cover)
	clear(sc.why)
	return sc
}

func putScratch(sc *scratch) { scratchPool.Put(sc) }

// queryWords answers every word a query's words stand for, each at its
// closest.
func queryWords(groups []group) map[string]float64 {
	m := map[string]float64{}
	for _, g := range groups {
		for _, r := range g.terms {
			if r.Weight > m[r.Term] {
				m[r.Term] = r.Weight
			}
		}
	}
	return m
}

// nameCover answers how much of a tool's name (past its namespace) the
// query's words name: what a request for the tool's action says, its
// verb and its object, whatever else it adds.
func nameCover(d *doc, qm map[string]float64) float64 {
	words := d.name
	if strings.Contains(d.tool.Def.Name, ".") && len(words) > 1 {
		words = words[len(Terms(d.tool.Def.Name[:strings.Index(d.tool.Def.Name, ".")])):]
	}
	if len(words) == 0 {
		return 0
	}
	var sum float64
	for _, w := range words {
		sum += qm[w]
	}
	return sum / float64(len(words))
}
