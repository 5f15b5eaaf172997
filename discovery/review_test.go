package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// A rebuild beside searches whose candidates the index has not yet
// followed to (they analyse them on demand): neither writes a map the
// other reads (the race detector says).
func TestResetBesideASearchRacingIt(t *testing.T) {
	a := syntheticRegistry(t, 2000)
	b := syntheticRegistry(t, 2000) // other pointers, same texts
	x := New(Options{})
	x.Rebuild(a.Every())
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				x.Rebuild(a.Every())
			} else {
				x.Rebuild(b.Every()[:1000])
			}
		}
	}()
	ts := b.Tools("")
	for i := 0; i < 40; i++ {
		// Candidates the corpus may not hold: doc() inserts them.
		if _, err := x.Search(ctx, "", ts[i*10:i*10+500], Query{Text: "refund order"}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// A replacement is moved above its deprecated version only when the
// query's filters keep it: state=deprecated never answers an active tool,
// effect=read never a write tool.
func TestReplacementHeldToFilters(t *testing.T) {
	t.Parallel()
	old := tool("crm.search_customers", "Search customers by name, email, phone, company, city or country.", "crm")
	repl := tool("crm.find_people", "Find people records.", "people")
	repl.Effect = toolplane.EffectWrite
	no := false
	repl.Repeatable = &no
	reg := world(t, nil, []registry.Version{
		{Organization: "org-a", Def: old, State: toolplane.StateDeprecated, Replacement: "crm.find_people"},
		{Organization: "org-a", Def: repl, State: toolplane.StateActive},
	})
	x := New(Options{})
	x.Follow(reg)
	for _, q := range []Query{
		{Text: "search customers by email", State: toolplane.StateDeprecated},
		{Text: "search customers by email", Effect: toolplane.EffectRead},
		{Text: "search customers by email", Tags: []string{"crm"}},
	} {
		res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Matches {
			if m.Name == "crm.find_people" {
				t.Errorf("%+v: answered %s (state %s, effect %s, tags %v), which the filter excludes; total %d, %d matches",
					q, m.Name, m.State, m.Effect, m.Tags, res.Total, len(res.Matches))
			}
		}
	}
}

// Total counts a replacement that matched no word but was moved up, so
// it is never below the matches answered.
func TestTotalNotBelowMatches(t *testing.T) {
	t.Parallel()
	old := tool("crm.search_customers", "Search customers by name, email, phone, company, city or country.", "crm")
	repl := tool("crm.lookup", "Zyx.", "other")
	reg := world(t, nil, []registry.Version{
		{Organization: "org-a", Def: old, State: toolplane.StateDeprecated, Replacement: "crm.lookup"},
		{Organization: "org-a", Def: repl, State: toolplane.StateActive},
	})
	x := New(Options{})
	x.Follow(reg)
	res, err := x.Search(context.Background(), "org-a", reg.Tools("org-a"), Query{Text: "search customers by email"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total < len(res.Matches) {
		t.Errorf("total %d < %d matches %v", res.Total, len(res.Matches), names(res.Matches))
	}
}

// A tool's tags are bounded by the registry, so no answer naming a tool
// is made large by them.
func TestTagsAreBounded(t *testing.T) {
	t.Parallel()
	d := tool("misc.tagged", "Refund an order for a customer.")
	for i := range 33 {
		d.Tags = append(d.Tags, fmt.Sprintf("t%d", i))
	}
	_, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"misc.tagged": false}}})
	if err == nil {
		t.Fatal("the registry took a tool with 33 tags")
	}
	d.Tags = []string{strings.Repeat("x", 65)}
	if _, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: registry.Static{Handlers: map[string]bool{"misc.tagged": false}}}); err == nil {
		t.Fatal("the registry took a 65-byte tag")
	}
}

// An invalid UTF-8 byte early in a long query drops that byte, not
// everything after it.
func TestClipInvalidUTF8(t *testing.T) {
	t.Parallel()
	q := "a\xff refund order " + strings.Repeat("x", 2000)
	if c := clip(q); len(c) < 16 {
		t.Errorf("clip kept %q of a query whose first 1024 bytes hold a valid 'refund order'", c)
	}
}

// BenchmarkRebuildUnchanged is what every registry change costs the
// index (under the registry's lock) when nothing it holds changed.
func BenchmarkRebuildUnchanged(b *testing.B) {
	reg := syntheticRegistry(b, 10_000)
	ts := reg.Every()
	x := New(Options{})
	x.Rebuild(ts)
	for b.Loop() {
		x.Rebuild(ts)
	}
}

// A query holding no word the analyser keeps (stop words, emoji,
// punctuation) is answered "no good match", not with the catalogue by
// name.
func TestWordlessQueryIsNoGoodMatch(t *testing.T) {
	t.Parallel()
	reg := world(t, crm, nil)
	x := New(Options{})
	x.Follow(reg)
	for _, q := range []string{"what is it", "do it for me", "🙂🙂", "???"} {
		res, err := x.Search(context.Background(), "", reg.Tools(""), Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NoGoodMatch {
			t.Errorf("%q: answered %v (total %d), not no good match", q, names(res.Matches), res.Total)
		}
	}
}

// The graph's bound on its tools holds for the tools taking the root's
// output (fan-in) and for its edges, and a match names a required tool
// only when the dependency's version range holds it, as the graph does.
func TestGraphBoundsAndRanges(t *testing.T) {
	t.Parallel()
	root := tool("core.get_id", "Get an id.")
	defs := []toolplane.Definition{root}
	for i := range 500 {
		d := tool(fmt.Sprintf("use.step_%03d", i), "Use an id.")
		d.Dependencies = []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "core.get_id"}}
		defs = append(defs, d)
	}
	ranged := tool("pay.refund", "Refund an order.")
	ranged.Dependencies = []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "core.get_id@^2.0.0"}}
	defs = append(defs, ranged)
	reg := world(t, defs, nil)
	var rt *registry.Tool
	for _, tl := range reg.Tools("") {
		if tl.Def.Name == "core.get_id" {
			rt = tl
		}
	}
	g := Dependencies(rt, reg.Tools(""))
	if len(g.Nodes) > maxGraph {
		t.Errorf("a graph of %d tools, the bound is %d", len(g.Nodes), maxGraph)
	}
	x := New(Options{})
	x.Follow(reg)
	res, err := x.Search(context.Background(), "", reg.Tools(""), Query{Text: "refund an order"})
	if err != nil {
		t.Fatal(err)
	}
	var pt *registry.Tool
	for _, tl := range reg.Tools("") {
		if tl.Def.Name == "pay.refund" {
			pt = tl
		}
	}
	pg := Dependencies(pt, reg.Tools(""))
	if len(res.Matches) > 0 && res.Matches[0].Name == "pay.refund" && len(res.Matches[0].Requires) != len(pg.Before) {
		t.Errorf("the match says it requires %v, its graph %v (core.get_id is 1.0.0, the edge asks ^2.0.0)", res.Matches[0].Requires, pg.Before)
	}
}

// A tool with no dependency answers "edges": [], as the OpenAPI document's
// DependencyGraph requires.
func TestGraphEdgesNull(t *testing.T) {
	t.Parallel()
	reg := world(t, crm, nil)
	g := Dependencies(reg.Tools("")[0], reg.Tools(""))
	b, _ := json.Marshal(g)
	if strings.Contains(string(b), `"edges":null`) {
		t.Errorf("the graph answers %s", b)
	}
}

// A group set again with only a title, tags, hints or dependencies
// changed is a change the registry announces, so the index follows it
// and keeps only what the registry serves.
func TestUnannouncedChangeGrowsCorpus(t *testing.T) {
	t.Parallel()
	handlers := map[string]bool{}
	for _, d := range crm {
		handlers[d.Binding.Handler.Key] = false
	}
	reg, _, err := registry.Build(nil, registry.Options{Bindings: registry.Static{Handlers: handlers}})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetGroup("upstream", crm)
	x := New(Options{})
	x.Follow(reg)
	before := x.Size()
	for i := range 5 {
		defs := append([]toolplane.Definition(nil), crm...)
		for j := range defs {
			defs[j].Title = fmt.Sprintf("Title %d", i)
		}
		reg.SetGroup("upstream", defs)
		if _, err := x.Search(context.Background(), "", reg.Tools(""), Query{Text: "refund"}); err != nil {
			t.Fatal(err)
		}
	}
	if x.Size() != before {
		t.Errorf("the index held %d versions, now %d, the registry serving %d", before, x.Size(), len(reg.Every()))
	}
}
