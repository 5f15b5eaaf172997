package thesaurus

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/discovery"
)

// term analyses one word as the engine does.
func term(t testing.TB, word string) string {
	t.Helper()
	ts := discovery.Terms(word)
	if len(ts) != 1 {
		t.Fatalf("Terms(%q) = %v, want one term", word, ts)
	}
	return ts[0]
}

func terms(rs []discovery.Related) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Term
	}
	return out
}

func TestDefaultRelates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		word    string
		anyOf   []string // at least one of these is related
		noneOf  []string // none of these is
		noStems []string // no related term begins with these
	}{
		{word: "refund", anyOf: []string{"reimburse", "repay"}},
		{word: "delete", anyOf: []string{"remove"}},
		{word: "customer", anyOf: []string{"client"}},
		{word: "customer", anyOf: []string{"buyer"}},
		{word: "order", anyOf: []string{"purchase"}, noStems: []string{"monast", "monk", "religi", "friar"}},
		{word: "ticket", anyOf: []string{"issue", "incident"}},
		{word: "vm", anyOf: []string{"instance", "server"}},
		{word: "deploy", anyOf: []string{"release", "rollout"}},
		{word: "email", anyOf: []string{"mail"}},
		{word: "invoice", anyOf: []string{"bill"}},
		{word: "repo", anyOf: []string{"repository"}},
		{word: "revoke", anyOf: []string{"disable", "invalidate"}},
		{word: "rotate", anyOf: []string{"renew", "regenerate"}},
		{word: "shipment", anyOf: []string{"parcel", "package"}},
		{word: "meeting", anyOf: []string{"appointment", "event"}},
		{word: "stock", anyOf: []string{"inventory"}},
		// WordNet alone.
		{word: "automobile", anyOf: []string{"car"}},
		{word: "purchase", anyOf: []string{"buy"}},
		{word: "happy", anyOf: []string{"glad"}},
		{word: "physician", anyOf: []string{"doctor"}},
		// One-way and rare senses stay out.
		{word: "remove", noneOf: []string{"nuke"}},
		// The domain list overrules WordNet.
		{word: "user", noneOf: []string{"use"}},
		{word: "server", noneOf: []string{"waiter"}},
	}
	th := Default()
	for _, c := range cases {
		t.Run(c.word, func(t *testing.T) {
			t.Parallel()
			got := th.Related(term(t, c.word))
			ts := terms(got)
			if len(c.anyOf) > 0 && !slices.ContainsFunc(c.anyOf, func(w string) bool { return slices.Contains(ts, term(t, w)) }) {
				t.Errorf("Related(%q) = %v, want one of %v", term(t, c.word), ts, c.anyOf)
			}
			for _, w := range c.noneOf {
				if slices.Contains(ts, term(t, w)) {
					t.Errorf("Related(%q) = %v, want no %q", term(t, c.word), ts, w)
				}
			}
			for _, p := range c.noStems {
				for _, r := range ts {
					if strings.HasPrefix(r, p) {
						t.Errorf("Related(%q) holds %q, want nothing beginning %q", term(t, c.word), r, p)
					}
				}
			}
		})
	}
}

// checkRelated holds what Related promises of every answer.
func checkRelated(t *testing.T, th *Thesaurus, from string) {
	t.Helper()
	rs := th.Related(from)
	if len(rs) > MaxRelated {
		t.Errorf("Related(%q): %d terms, want at most %d", from, len(rs), MaxRelated)
	}
	seen := map[string]bool{}
	for i, r := range rs {
		if !(r.Weight > 0 && r.Weight <= 1) || math.IsNaN(r.Weight) {
			t.Errorf("Related(%q): %q weighs %v, want (0,1]", from, r.Term, r.Weight)
		}
		if r.Term == from || r.Term == "" {
			t.Errorf("Related(%q) relates %q", from, r.Term)
		}
		if seen[r.Term] {
			t.Errorf("Related(%q) holds %q twice", from, r.Term)
		}
		seen[r.Term] = true
		if i > 0 && rs[i-1].Weight < r.Weight {
			t.Errorf("Related(%q) is not best first: %v", from, rs)
		}
	}
}

func TestRelatedPromises(t *testing.T) {
	t.Parallel()
	th := Default()
	wn := th.tables[1]
	domain := th.tables[0]
	n := 0
	for _, tab := range []*table{domain, wn} {
		for i, name := range tab.names {
			if tab == wn && i%7 != 0 {
				continue // a sample: every term takes a while under -race
			}
			checkRelated(t, th, name)
			n++
		}
	}
	if n < 5000 {
		t.Fatalf("checked %d terms; the embedded data looks truncated", n)
	}
	if got := th.Related("no-such-term-anywhere"); got != nil {
		t.Errorf("Related of an unknown term = %v, want nil", got)
	}
	var zero Thesaurus
	if got := zero.Related("order"); got != nil {
		t.Errorf("the zero Thesaurus relates %v", got)
	}
}

// TestCuratedOutranks: every relation of the domain list is in Default
// at the list's weight, whatever WordNet says of the pair.
func TestCuratedOutranks(t *testing.T) {
	t.Parallel()
	domain, err := Parse(bytes.NewReader(domainList))
	if err != nil {
		t.Fatal(err)
	}
	th := Default()
	pairs := 0
	for _, from := range domain.tables[0].names {
		got := map[string]float64{}
		for _, r := range th.Related(from) {
			got[r.Term] = r.Weight
		}
		for _, r := range domain.Related(from) {
			pairs++
			if w, ok := got[r.Term]; !ok || w != r.Weight {
				t.Errorf("Default relates %q to %q at %v (present %v), want the list's %v", from, r.Term, w, ok, r.Weight)
			}
		}
	}
	if pairs < 1000 {
		t.Errorf("the domain list holds %d pairs; want a list of the size it was written at", pairs)
	}
}

// TestWordNetKeyedByAnalyser: the generated data is keyed by the terms
// discovery.Terms makes today; if the analysis changes, the data must be
// generated again (go run ./internal/thesaurusgen).
func TestWordNetKeyedByAnalyser(t *testing.T) {
	t.Parallel()
	wn := Default().tables[1]
	for _, w := range []string{"customers", "deleting", "refunded", "orders", "shipping", "happiness", "running", "analysed"} {
		if tm := term(t, w); len(wn.related(tm)) == 0 {
			t.Errorf("WordNet data has nothing for %q (Terms(%q)); regenerate it", tm, w)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	type rel = map[string]float64
	cases := []struct {
		name string
		list string
		want map[string]rel // for each word (surface), its related (surface) words
		err  bool
	}{
		{
			name: "group",
			list: "# a comment\n\ndelete, remove, erase # trailing comment\n",
			want: map[string]rel{
				"delete": {"remove": DefaultWeight, "erase": DefaultWeight},
				"erase":  {"delete": DefaultWeight, "remove": DefaultWeight},
			},
		},
		{
			name: "weight, forms of one word are one word",
			list: "0.6: deletes, deletion, removing\n",
			want: map[string]rel{"delete": {"remove": 0.6}, "removal": {"delete": 0.6}},
		},
		{
			name: "one way",
			list: "1: refund => reimburse, repay\n",
			want: map[string]rel{"refund": {"reimburse": 1, "repay": 1}, "repay": {}},
		},
		{
			name: "phrase",
			list: "0.8: refund, money back\n",
			want: map[string]rel{"refund": {"money": 0.4, "back": 0.4}, "money": {}},
		},
		{
			name: "greatest weight of several groups",
			list: "0.5: bill, invoice\n0.7: invoice, bill, charge\n",
			want: map[string]rel{"bill": {"invoice": 0.7, "charge": 0.7}},
		},
		{
			name: "unrelated overrules a group, both ways",
			list: "delete, remove, erase\ndeleting != erasing\n",
			want: map[string]rel{"delete": {"remove": DefaultWeight}, "erase": {"remove": DefaultWeight}},
		},
		{name: "unrelated with a weight", list: "0.5: a1 != b1\n", err: true},
		{name: "unrelated phrase", list: "money back != refund\n", err: true},
		{name: "weight above 1", list: "1.5: a1, b1\n", err: true},
		{name: "weight 0", list: "0: a1, b1\n", err: true},
		{name: "weight not a number", list: "x: a1, b1\n", err: true},
		{name: "one word", list: "lonely\n", err: true},
		{name: "empty word", list: "delete, , remove\n", err: true},
		{name: "stop words only", list: "delete, the\n", err: true},
		{name: "phrase left of =>", list: "money back => refund\n", err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			th, err := Parse(strings.NewReader(c.list))
			if c.err {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("Parse = %v, want ErrFormat", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for from, want := range c.want {
				got := rel{}
				for _, r := range th.Related(term(t, from)) {
					got[r.Term] = r.Weight
				}
				wantT := rel{}
				for w, x := range want {
					wantT[term(t, w)] = x
				}
				if len(got) != len(wantT) {
					t.Errorf("Related(%q) = %v, want %v", from, got, wantT)
				}
				for w, x := range wantT {
					if math.Abs(got[w]-x) > 1e-6 {
						t.Errorf("Related(%q)[%q] = %v, want %v", from, w, got[w], x)
					}
				}
			}
		})
	}
}

func TestParseBounds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("hub")
	for i := range 3 * MaxRelated {
		b.WriteString(", w")
		b.WriteString(strings.Repeat("x", i+1))
	}
	th, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(th.Related("hub")); got != MaxRelated {
		t.Errorf("a word in a group of %d relates to %d, want %d", 3*MaxRelated+1, got, MaxRelated)
	}
	checkRelated(t, th, "hub")
}

func TestCombine(t *testing.T) {
	t.Parallel()
	own, err := Parse(strings.NewReader("0.3: delete, remove\n1: delete, nuke\ndelete != excise\n"))
	if err != nil {
		t.Fatal(err)
	}
	th := Combine(own, Default())
	got := map[string]float64{}
	for _, r := range th.Related(term(t, "delete")) {
		got[r.Term] = r.Weight
	}
	if got["nuke"] != 1 {
		t.Errorf("own list's nuke weighs %v, want 1", got["nuke"])
	}
	if w := got[term(t, "remove")]; math.Abs(w-0.3) > 1e-6 {
		t.Errorf("own list's remove weighs %v, want 0.3 (the earlier list wins)", w)
	}
	if _, ok := got[term(t, "excise")]; ok {
		t.Errorf("own list's != left WordNet's excise in: %v", got)
	}
	if !slices.Contains(terms(Default().Related(term(t, "delete"))), term(t, "excise")) {
		t.Errorf("Default does not relate delete to excise; the != case tests nothing")
	}
	if _, ok := got[term(t, "erase")]; !ok {
		t.Errorf("Combine lost the default's erase: %v", got)
	}
	checkRelated(t, th, term(t, "delete"))
}

// BenchmarkLoad measures reading the embedded data, as Default does once,
// and what the result holds on the heap:
// go test -run XXX -bench Load -benchmem ./discovery/thesaurus
func BenchmarkLoad(b *testing.B) {
	var tabs [2]*table
	for b.Loop() {
		d, err := parseList(bytes.NewReader(domainList))
		if err != nil {
			b.Fatal(err)
		}
		w, err := parseCompiled(wordnetData)
		if err != nil {
			b.Fatal(err)
		}
		tabs = [2]*table{d, w}
	}
	b.StopTimer()
	tabs = [2]*table{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, _ := parseList(bytes.NewReader(domainList))
	w, _ := parseCompiled(wordnetData)
	tabs = [2]*table{d, w}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes")
	b.ReportMetric(float64(tabs[0].terms()), "domain-terms")
	b.ReportMetric(float64(tabs[1].terms()), "wordnet-terms")
	b.ReportMetric(float64(len(wordnetData)), "data-bytes")
	runtime.KeepAlive(tabs)
}

func BenchmarkRelated(b *testing.B) {
	th := Default()
	words := []string{"refund", "delet", "custom", "order", "xyzzy"}
	for i := 0; b.Loop(); i++ {
		th.Related(words[i%len(words)])
	}
}
