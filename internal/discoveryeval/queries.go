package discoveryeval

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
)

// The kinds of query the set holds.
const (
	// KindParaphrase says what a tool does in words none of its text
	// uses (checked: see TestParaphrasesShareNoWord).
	KindParaphrase = "paraphrase"
	// KindKeyword uses the catalogue's own words, often a system's name.
	KindKeyword = "keyword"
	// KindMultiIntent asks for two things at once: each is a need.
	KindMultiIntent = "multi_intent"
	// KindAmbiguous names an operation several systems offer and not
	// which: each of them is right.
	KindAmbiguous = "ambiguous"
	// KindNoAnswer asks for something near the catalogue's domains that no
	// tool in it does: the right answer is "no good match".
	KindNoAnswer = "no_answer"
)

// Kinds lists the kinds in the order reports show them.
var Kinds = []string{KindKeyword, KindParaphrase, KindAmbiguous, KindMultiIntent, KindNoAnswer}

// The halves of the query set: one to tune the search against, one held
// out to judge it.
const (
	SplitTuning  = "tuning"
	SplitHeldOut = "heldout"
)

// Query is one labelled query.
type Query struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Split is SplitTuning or SplitHeldOut, assigned alternately within
	// each kind so both halves hold every kind alike.
	Split string `json:"split"`
	Text  string `json:"text"`
	// Needs are what the query asks for, one for most queries, one per
	// intent for a multi-intent one: each maps the tools (platform
	// names) that satisfy it to a grade, 2 for the right tool, 1 for an
	// acceptable one. A no-answer query has none.
	Needs []map[string]int `json:"needs"`
}

// Grade answers the best grade any need gives tool (0: not relevant).
func (q Query) Grade(tool string) int {
	g := 0
	for _, n := range q.Needs {
		g = max(g, n[tool])
	}
	return g
}

// Relevant answers every tool any need grades, sorted.
func (q Query) Relevant() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range q.Needs {
		for name := range n {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}

//go:embed queries.json
var queriesJSON []byte

// Queries answers the labelled query set.
func Queries() ([]Query, error) {
	return ReadQueries(bytes.NewReader(queriesJSON))
}

// ReadQueries reads a query set in the form of the embedded one (a JSON
// array of Query): a set written elsewhere, run against the same
// catalogue. Every tool a need names must be in the catalogue, and every
// kind and split known.
func ReadQueries(r io.Reader) ([]Query, error) {
	var qs []Query
	if err := json.NewDecoder(r).Decode(&qs); err != nil {
		return nil, fmt.Errorf("discoveryeval: read the query set: %w", err)
	}
	names := map[string]bool{}
	for _, t := range Catalogue() {
		names[t.Def.Name] = true
	}
	for i, q := range qs {
		if !slices.Contains(Kinds, q.Kind) {
			return nil, fmt.Errorf("discoveryeval: query %d (%s): kind %q: give one of %v", i, q.ID, q.Kind, Kinds)
		}
		if q.Split != SplitTuning && q.Split != SplitHeldOut {
			return nil, fmt.Errorf("discoveryeval: query %d (%s): split %q: give tuning or heldout", i, q.ID, q.Split)
		}
		for _, name := range q.Relevant() {
			if !names[name] {
				return nil, fmt.Errorf("discoveryeval: query %d (%s): %s is not in the catalogue", i, q.ID, name)
			}
		}
	}
	return qs, nil
}

// InSplit answers the queries of split (SplitTuning, SplitHeldOut, or ""
// and "all" for every one).
func InSplit(qs []Query, split string) []Query {
	if split == "" || split == "all" {
		return qs
	}
	var out []Query
	for _, q := range qs {
		if q.Split == split {
			out = append(out, q)
		}
	}
	return out
}
