package discoveryeval

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
)

// toolTerms answers the analysed words of everything a search reads of d:
// its name, title, description, tags, hints and parameters.
func toolTerms(d *toolplane.Definition) map[string]bool {
	out := map[string]bool{}
	add := func(s string) {
		for _, t := range discovery.Terms(s) {
			out[t] = true
		}
	}
	add(d.Name)
	add(d.Title)
	add(d.Description)
	for _, s := range d.Tags {
		add(s)
	}
	for _, s := range d.SearchHints {
		add(s)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if _, isProps := v["properties"]; isProps && k == "properties" {
					for name, p := range x.(map[string]any) {
						add(name)
						walk(p)
					}
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case string:
			add(v)
		}
	}
	var s any
	if err := json.Unmarshal(d.InputSchema, &s); err == nil {
		walk(s)
	}
	return out
}

func TestParaphrasesShareNoWord(t *testing.T) {
	t.Parallel()
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]*toolplane.Definition{}
	cat := Catalogue()
	for i := range cat {
		byName[cat[i].Def.Name] = append(byName[cat[i].Def.Name], &cat[i].Def)
	}
	n := 0
	for _, q := range qs {
		if q.Kind != KindParaphrase {
			continue
		}
		n++
		words := discovery.Terms(q.Text)
		if len(words) == 0 {
			t.Errorf("%s: %q has no words", q.ID, q.Text)
		}
		for _, name := range q.Relevant() {
			for _, d := range byName[name] {
				terms := toolTerms(d)
				var shared []string
				for _, w := range words {
					if terms[w] {
						shared = append(shared, w)
					}
				}
				if len(shared) > 0 {
					t.Errorf("%s: paraphrase %q shares %q with %s %s", q.ID, q.Text, shared, name, d.Version)
				}
			}
		}
	}
	if n < 60 {
		t.Errorf("%d paraphrases, want at least 60", n)
	}
}

func TestQuerySet(t *testing.T) {
	t.Parallel()
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range Catalogue() {
		names[tl.Def.Name] = true
	}
	ids := map[string]bool{}
	perKind := map[string]map[string]int{}
	for _, q := range qs {
		if ids[q.ID] {
			t.Errorf("%s given twice", q.ID)
		}
		ids[q.ID] = true
		if !slices.Contains(Kinds, q.Kind) {
			t.Errorf("%s: kind %q", q.ID, q.Kind)
		}
		if q.Split != SplitTuning && q.Split != SplitHeldOut {
			t.Errorf("%s: split %q", q.ID, q.Split)
		}
		if perKind[q.Kind] == nil {
			perKind[q.Kind] = map[string]int{}
		}
		perKind[q.Kind][q.Split]++
		if (q.Kind == KindNoAnswer) != (len(q.Needs) == 0) {
			t.Errorf("%s: a %s query with %d needs", q.ID, q.Kind, len(q.Needs))
		}
		if q.Kind == KindMultiIntent && len(q.Needs) < 2 {
			t.Errorf("%s: a multi-intent query with %d needs", q.ID, len(q.Needs))
		}
		for _, n := range q.Needs {
			best := 0
			for name, g := range n {
				if !names[name] {
					t.Errorf("%s: %s is not in the catalogue", q.ID, name)
				}
				if g < 1 || g > 2 {
					t.Errorf("%s: %s graded %d", q.ID, name, g)
				}
				best = max(best, g)
			}
			if best != 2 {
				t.Errorf("%s: a need with no right tool", q.ID)
			}
		}
		if strings.TrimSpace(q.Text) == "" {
			t.Errorf("%s: no text", q.ID)
		}
	}
	if len(qs) < 200 {
		t.Errorf("%d queries, want at least 200", len(qs))
	}
	if perKind[KindNoAnswer][SplitTuning]+perKind[KindNoAnswer][SplitHeldOut] < 40 {
		t.Errorf("too few no-answer queries: %v", perKind[KindNoAnswer])
	}
	kinds := make([]string, 0, len(perKind))
	for k := range perKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if d := perKind[k][SplitTuning] - perKind[k][SplitHeldOut]; d < -1 || d > 1 {
			t.Errorf("kind %s is split %v: not balanced", k, perKind[k])
		}
	}
}

func TestReadQueriesRefuses(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown tool":  `[{"id":"x","kind":"keyword","split":"tuning","text":"a","needs":[{"nope.tool":2}]}]`,
		"unknown kind":  `[{"id":"x","kind":"vibes","split":"tuning","text":"a","needs":[]}]`,
		"unknown split": `[{"id":"x","kind":"no_answer","split":"dev","text":"a","needs":[]}]`,
		"not JSON":      `[{`,
	}
	for name, in := range cases {
		if _, err := ReadQueries(strings.NewReader(in)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
	qs, err := ReadQueries(strings.NewReader(`[{"id":"x","kind":"keyword","split":"heldout","text":"a","needs":[{"stripe.refund_charge":2}]}]`))
	if err != nil || len(qs) != 1 || qs[0].Grade("stripe.refund_charge") != 2 {
		t.Errorf("a valid set: %v, %v", qs, err)
	}
}
