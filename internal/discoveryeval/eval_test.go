package discoveryeval

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/offline"
	"github.com/toolplane/toolplane/registry"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-4 }

func TestScoreQuery(t *testing.T) {
	t.Parallel()
	two := Query{Needs: []map[string]int{{"a.x": 2, "b.x": 1}, {"c.x": 2}}}
	cases := []struct {
		name   string
		q      Query
		ranked []string
		want   QueryScores
	}{
		// First relevant at 2 (grade 1), the other need at 3 (grade 2):
		// DCG = 1/log2(3) + 3/log2(4); ideal = 3 + 3/log2(3) + 1/log2(4).
		{"two needs", two, []string{"x.y", "b.x", "c.x", "y.z"},
			QueryScores{RecallAt1: 0, RecallAt5: 1, RR: 0.5, Rank: 2, NDCG10: (1/math.Log2(3) + 1.5) / (3 + 3/math.Log2(3) + 0.5)}},
		{"one need met first", two, []string{"a.x"},
			QueryScores{RecallAt1: 0.5, RecallAt5: 0.5, RR: 1, Rank: 1, NDCG10: 3 / (3 + 3/math.Log2(3) + 0.5)}},
		{"met past five", Query{Needs: []map[string]int{{"a.x": 2}}}, []string{"1.a", "2.a", "3.a", "4.a", "5.a", "a.x"},
			QueryScores{RR: 1.0 / 6, Rank: 6, NDCG10: 1 / math.Log2(7)}}, // rank 6: gain 3 over log2(6+1), ideal 3,
		{"nothing", Query{Needs: []map[string]int{{"a.x": 2}}}, nil, QueryScores{}},
	}
	for _, c := range cases {
		got := ScoreQuery(c.q, c.ranked)
		if !near(got.RecallAt1, c.want.RecallAt1) || !near(got.RecallAt5, c.want.RecallAt5) || !near(got.RR, c.want.RR) ||
			!near(got.NDCG10, c.want.NDCG10) || got.Rank != c.want.Rank {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestScore(t *testing.T) {
	t.Parallel()
	one := func(id, kind, split string, needs ...map[string]int) Query {
		return Query{ID: id, Kind: kind, Split: split, Text: id, Needs: needs}
	}
	outs := []Outcome{
		{Query: one("k1", KindKeyword, SplitTuning, map[string]int{"a.x": 2}), Ranked: []string{"a.x"}},
		{Query: one("k2", KindKeyword, SplitTuning, map[string]int{"a.x": 2}), Ranked: []string{"b.x", "c.x", "a.x"}, Violations: []string{"b.x -> a.x"}},
		{Query: one("p1", KindParaphrase, SplitTuning, map[string]int{"a.x": 2}), NoGoodMatch: true},
		{Query: one("n1", KindNoAnswer, SplitTuning), NoGoodMatch: true},
		{Query: one("n2", KindNoAnswer, SplitTuning), Ranked: []string{"z.z"}},
		{Query: one("k3", KindKeyword, SplitHeldOut, map[string]int{"a.x": 2}), Ranked: []string{"b.x"}},
	}
	r := Score(SplitTuning, 7, outs)
	kw := r.Kinds[KindKeyword]
	if kw == nil || kw.N != 2 || !near(kw.RecallAt1, 0.5) || !near(kw.RecallAt5, 1) || !near(kw.MRR, (1+1.0/3)/2) || !near(kw.NDCG10, (1+0.5)/2) {
		t.Errorf("keyword scores %+v", kw)
	}
	if r.Overall.N != 3 || !near(r.Overall.RecallAt5, 2.0/3) || r.Overall.Rejected != 1 || !near(r.FalseRejectionRate, 1.0/3) {
		t.Errorf("overall %+v, false rejection %v", r.Overall, r.FalseRejectionRate)
	}
	if r.NoAnswer != 2 || !near(r.RejectionRate, 0.5) || r.DeprecatedAbove != 1 {
		t.Errorf("no answer %d, rejection %v, deprecated above %d", r.NoAnswer, r.RejectionRate, r.DeprecatedAbove)
	}
	// k2 (first not relevant), p1 (rejected), n2 (answered) failed.
	var ids []string
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	if strings.Join(ids, ",") != "k2,p1,n2" {
		t.Errorf("failures %v", ids)
	}
	if all := Score("all", 7, outs); all.Overall.N != 4 || all.Kinds[KindKeyword].N != 3 {
		t.Errorf("all: %+v", all.Overall)
	}
	if h := Score(SplitHeldOut, 7, outs); h.Overall.N != 1 || h.Overall.RecallAt5 != 0 {
		t.Errorf("held out: %+v", h.Overall)
	}
}

func TestViolations(t *testing.T) {
	t.Parallel()
	tool := func(name string, state toolplane.VersionState, repl string) *registry.Tool {
		return &registry.Tool{Def: toolplane.Definition{Name: name, Version: "1.0.0"}, State: state, Replacement: repl}
	}
	old := tool("old.x", toolplane.StateDeprecated, "new.x@^1.0.0")
	nw := tool("new.x", toolplane.StateActive, "")
	self := tool("self.x", toolplane.StateDeprecated, "self.x@^2.0.0")
	m := func(t *registry.Tool) discovery.Match {
		return discovery.Match{Name: t.Def.Name, State: t.State, Tool: t}
	}
	active := map[string]*registry.Tool{"new.x": nw}
	cases := []struct {
		name string
		ms   []discovery.Match
		want int
	}{
		{"replacement above", []discovery.Match{m(nw), m(old)}, 0},
		{"replacement below", []discovery.Match{m(old), m(nw)}, 1},
		{"replacement missing", []discovery.Match{m(old)}, 1},
		{"replaced by its own next major", []discovery.Match{m(self)}, 0},
	}
	for _, c := range cases {
		if got := violations(c.ms, active); len(got) != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	if got := violations([]discovery.Match{m(old)}, map[string]*registry.Tool{}); len(got) != 0 {
		t.Errorf("a replacement the caller may not call counted: %v", got)
	}
}

// TestRunSlice runs the harness end to end over a few queries of each
// kind and checks what it reports against the outcomes it searched.
func TestRunSlice(t *testing.T) {
	t.Parallel()
	all, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	var qs []Query
	for _, q := range all {
		if per[q.Kind] < 4 {
			per[q.Kind]++
			qs = append(qs, q)
		}
	}
	res, err := Run(context.Background(), Config{Queries: qs})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reports) != 3 || len(res.Outcomes) != len(qs) {
		t.Fatalf("%d reports, %d outcomes", len(res.Reports), len(res.Outcomes))
	}
	byID := map[string]Report{}
	for _, r := range res.Reports {
		byID[r.Split] = r
	}
	tn, hn, an := byID[SplitTuning].Overall.N, byID[SplitHeldOut].Overall.N, byID["all"].Overall.N
	if tn+hn != an || an != len(qs)-per[KindNoAnswer] || byID["all"].NoAnswer != per[KindNoAnswer] {
		t.Errorf("answerable %d + %d != %d (of %d)", tn, hn, an, len(qs))
	}
	// The report's figures are the mean of each outcome's.
	var r5 float64
	for _, o := range res.Outcomes {
		if o.Query.Kind != KindNoAnswer {
			r5 += ScoreQuery(o.Query, o.Ranked).RecallAt5
		}
		if len(o.Ranked) > Depth || (o.NoGoodMatch && len(o.Ranked) > 0) {
			t.Errorf("%s: %d matches, no good match %v", o.Query.ID, len(o.Ranked), o.NoGoodMatch)
		}
	}
	if !near(r5/float64(an), byID["all"].Overall.RecallAt5) {
		t.Errorf("recall@5 %v, outcomes say %v", byID["all"].Overall.RecallAt5, r5/float64(an))
	}
	var table, js bytes.Buffer
	if err := res.WriteTable(&table, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"split heldout", "recall@5", "no_answer:", "deprecated above its replacement:"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Reports) != 3 {
		t.Errorf("JSON does not read back: %v", err)
	}
}

// TestBenchFindsItsOwnWords checks the harness searches the catalogue it
// built: a tool's own title and description find it.
func TestBenchFindsItsOwnWords(t *testing.T) {
	t.Parallel()
	b, err := NewBench(Catalogue(), discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var qs []Query
	for _, name := range []string{"stripe.refund_charge", "okta.reset_mfa", "k8s.scale_deployment"} {
		tl, ok := b.Registry.Get("", name)
		if !ok {
			t.Fatalf("%s not served", name)
		}
		qs = append(qs, Query{ID: name, Kind: KindKeyword, Text: tl.Def.Title + " " + tl.Def.Description, Needs: []map[string]int{{name: 2}}})
	}
	outs, err := b.Run(context.Background(), qs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if ScoreQuery(o.Query, o.Ranked).RecallAt5 != 1 {
			t.Errorf("%s not in the first five for its own words: %v", o.Query.ID, o.Ranked)
		}
	}
	deprecated := 0
	for _, c := range b.Candidates {
		if c.State == toolplane.StateDeprecated {
			deprecated++
		}
	}
	if deprecated == 0 {
		t.Error("no deprecated tool among the candidates")
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	n, err := CountTokens("cl100k_base", "hello world")
	if err != nil || n != 2 {
		t.Fatalf("cl100k_base counts %q as %d tokens (%v), want 2", "hello world", n, err)
	}
	l, err := Tokens(600)
	if err != nil {
		t.Fatal(err)
	}
	if l.Tools != 600 {
		t.Errorf("grant of %d tools, want 600", l.Tools)
	}
	for _, e := range Encodings {
		if l.Meta[e] <= 0 || l.Full[e] <= 10*l.Meta[e] {
			t.Errorf("%s: full %d tokens, meta %d", e, l.Full[e], l.Meta[e])
		}
	}
	var res struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	meta, err := MetaListing()
	if err != nil || json.Unmarshal(meta, &res) != nil || len(res.Tools) != 3 || res.Tools[0].Name != discovery.FindTools || len(res.Tools[0].InputSchema) == 0 {
		t.Errorf("meta listing %s (%v)", meta, err)
	}
}

func TestGrow(t *testing.T) {
	t.Parallel()
	ts := Grow(1000)
	names := map[string]bool{}
	for _, tl := range ts {
		names[tl.Def.Name] = true
	}
	if len(names) != 1000 {
		t.Fatalf("%d names", len(names))
	}
	again := Grow(1000)
	for i := range ts {
		if ts[i].Def.Name != again[i].Def.Name || ts[i].Def.Binding.Handler.Key != ts[i].Def.Name {
			t.Fatalf("tool %d: %s then %s (handler %s)", i, ts[i].Def.Name, again[i].Def.Name, ts[i].Def.Binding.Handler.Key)
		}
	}
}

// BenchmarkSearch10k times one search among 10,000 candidates (the
// catalogue grown by Grow), each of the labelled queries in turn, once the
// caller's set is built.
func BenchmarkSearch10k(b *testing.B) {
	reg, err := LargeRegistry(LatencyTools)
	if err != nil {
		b.Fatal(err)
	}
	qs, err := Queries()
	if err != nil {
		b.Fatal(err)
	}
	// The offline default a node searches with.
	x := discovery.New(offline.Options())
	x.Rebuild(reg.Every())
	cands := reg.Tools("")
	ctx := context.Background()
	if _, err := x.Search(ctx, "", cands, discovery.Query{Text: qs[0].Text}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := x.Search(ctx, "", cands, discovery.Query{Text: qs[i%len(qs)].Text, Limit: Depth}); err != nil {
			b.Fatal(err)
		}
	}
}
