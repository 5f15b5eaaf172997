package discoveryeval

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/registry"
)

// Depth is how many matches each query asks for: nDCG is read to it.
const Depth = 10

// Outcome is what the search answered one query.
type Outcome struct {
	Query Query
	// Ranked are the platform names of the matches, best first.
	Ranked []string
	// NoGoodMatch says the search answered that nothing matched well.
	NoGoodMatch bool
	// Violations name each deprecated match ranked above (or shown
	// without) its active replacement: "old -> new".
	Violations []string
}

// Bench is an index over a catalogue and the candidates every query is
// searched among: the tools a person of the catalogue's organization is
// shown (one version per name, as door.Door.Shown answers).
type Bench struct {
	Index      *discovery.Index
	Registry   *registry.Registry
	Candidates []*registry.Tool
}

// NewBench builds tools into a registry and an index following it,
// searched with opt (its Thesaurus optional).
func NewBench(tools []Tool, opt discovery.Options) (*Bench, error) {
	reg, err := Registry(tools)
	if err != nil {
		return nil, err
	}
	x := discovery.New(opt)
	x.Rebuild(reg.Every())
	return &Bench{Index: x, Registry: reg, Candidates: reg.Tools("")}, nil
}

// Run searches every query and answers what each got.
func (b *Bench) Run(ctx context.Context, qs []Query) ([]Outcome, error) {
	active := map[string]*registry.Tool{}
	for _, t := range b.Candidates {
		if t.State == toolplane.StateActive {
			active[t.Def.Name] = t
		}
	}
	out := make([]Outcome, 0, len(qs))
	for _, q := range qs {
		res, err := b.Index.Search(ctx, "", b.Candidates, discovery.Query{Text: q.Text, Limit: Depth})
		if err != nil {
			return nil, fmt.Errorf("discoveryeval: search %s %q: %w", q.ID, q.Text, err)
		}
		o := Outcome{Query: q, NoGoodMatch: res.NoGoodMatch}
		for _, m := range res.Matches {
			o.Ranked = append(o.Ranked, m.Name)
		}
		o.Violations = violations(res.Matches, active)
		out = append(out, o)
	}
	return out, nil
}

// violations answers each deprecated match whose replacement (another
// tool the caller may call, active) is not ranked above it.
func violations(ms []discovery.Match, active map[string]*registry.Tool) []string {
	var out []string
	for i, m := range ms {
		if m.State != toolplane.StateDeprecated || m.Tool == nil {
			continue
		}
		name, _ := m.Tool.ReplacementRef()
		if name == "" || name == m.Name || active[name] == nil {
			continue
		}
		if !slices.ContainsFunc(ms[:i], func(x discovery.Match) bool { return x.Name == name }) {
			out = append(out, m.Name+" -> "+name)
		}
	}
	return out
}

// Scores are the relevance figures of a set of answerable queries.
type Scores struct {
	N int `json:"n"`
	// RecallAt1 and RecallAt5 are the mean share of a query's needs met
	// by a relevant tool (grade 1 or 2) among its first 1 or 5 matches:
	// a two-need query counts half for each need met, so its recall@1 is
	// at most 0.5.
	RecallAt1 float64 `json:"recall_at_1"`
	RecallAt5 float64 `json:"recall_at_5"`
	// MRR is the mean reciprocal rank of the first relevant match (0 when
	// none is among the first Depth).
	MRR float64 `json:"mrr"`
	// NDCG10 is the mean nDCG at 10 over the graded relevance, gain
	// 2^grade - 1.
	NDCG10 float64 `json:"ndcg_at_10"`
	// Rejected counts queries answered "no good match".
	Rejected int `json:"rejected"`
}

// Report is the figures of one run over one split.
type Report struct {
	Split string `json:"split"`
	// Tools is how many candidates every query was searched among.
	Tools int `json:"tools"`
	// Kinds holds the scores of each answerable kind, Overall of all
	// answerable queries together.
	Kinds   map[string]*Scores `json:"kinds"`
	Overall Scores             `json:"overall"`
	// FalseRejectionRate is the share of answerable queries answered "no
	// good match".
	FalseRejectionRate float64 `json:"false_rejection_rate"`
	// NoAnswer counts the queries with no right answer, RejectionRate
	// the share of them answered "no good match".
	NoAnswer      int     `json:"no_answer"`
	RejectionRate float64 `json:"rejection_rate"`
	// DeprecatedAbove counts deprecated matches ranked above their active
	// replacement, over every query.
	DeprecatedAbove int `json:"deprecated_above_replacement"`
	// Failures are the answerable queries whose first match is not
	// relevant, and the no-answer queries that were answered.
	Failures []Failure `json:"failures,omitempty"`
}

// Failure is one query the search got wrong.
type Failure struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Split string `json:"split"`
	Text  string `json:"text"`
	// First is what ranked first ("" when the search said no good match).
	First string `json:"first"`
	// Rank is where the first relevant tool ranked (0: not in the first
	// Depth).
	Rank int `json:"rank"`
	// Want is the tools graded 2.
	Want       []string `json:"want,omitempty"`
	Violations []string `json:"violations,omitempty"`
}

// QueryScores are one query's figures.
type QueryScores struct {
	RecallAt1, RecallAt5, RR, NDCG10 float64
	// Rank is the rank of the first relevant match (0: none).
	Rank int
}

// ScoreQuery computes one answerable query's figures from its ranking.
func ScoreQuery(q Query, ranked []string) QueryScores {
	var s QueryScores
	if len(q.Needs) == 0 {
		return s
	}
	met := func(k int) float64 {
		top := ranked[:min(k, len(ranked))]
		n := 0
		for _, need := range q.Needs {
			if slices.ContainsFunc(top, func(name string) bool { return need[name] > 0 }) {
				n++
			}
		}
		return float64(n) / float64(len(q.Needs))
	}
	s.RecallAt1, s.RecallAt5 = met(1), met(5)
	var dcg float64
	for i, name := range ranked[:min(Depth, len(ranked))] {
		g := q.Grade(name)
		if g > 0 && s.Rank == 0 {
			s.Rank = i + 1
			s.RR = 1 / float64(i+1)
		}
		dcg += gain(g) / math.Log2(float64(i+2))
	}
	var grades []int
	for _, name := range q.Relevant() {
		grades = append(grades, q.Grade(name))
	}
	slices.Sort(grades)
	slices.Reverse(grades)
	var ideal float64
	for i, g := range grades[:min(Depth, len(grades))] {
		ideal += gain(g) / math.Log2(float64(i+2))
	}
	if ideal > 0 {
		s.NDCG10 = dcg / ideal
	}
	return s
}

func gain(grade int) float64 { return math.Exp2(float64(grade)) - 1 }

// Score reads a run's outcomes into the report of split (outcomes of
// other splits are skipped; "all" keeps every one).
func Score(split string, tools int, outs []Outcome) Report {
	r := Report{Split: split, Tools: tools, Kinds: map[string]*Scores{}}
	add := func(s *Scores, q QueryScores, rejected bool) {
		s.N++
		s.RecallAt1 += q.RecallAt1
		s.RecallAt5 += q.RecallAt5
		s.MRR += q.RR
		s.NDCG10 += q.NDCG10
		if rejected {
			s.Rejected++
		}
	}
	rejected := 0
	for _, o := range outs {
		q := o.Query
		if split != "all" && split != "" && q.Split != split {
			continue
		}
		r.DeprecatedAbove += len(o.Violations)
		first := ""
		if len(o.Ranked) > 0 {
			first = o.Ranked[0]
		}
		if q.Kind == KindNoAnswer {
			r.NoAnswer++
			if o.NoGoodMatch {
				rejected++
			} else {
				r.Failures = append(r.Failures, Failure{ID: q.ID, Kind: q.Kind, Split: q.Split, Text: q.Text, First: first, Violations: o.Violations})
			}
			continue
		}
		qs := ScoreQuery(q, o.Ranked)
		k := r.Kinds[q.Kind]
		if k == nil {
			k = &Scores{}
			r.Kinds[q.Kind] = k
		}
		add(k, qs, o.NoGoodMatch)
		add(&r.Overall, qs, o.NoGoodMatch)
		if qs.Rank != 1 || len(o.Violations) > 0 {
			var want []string
			for _, name := range q.Relevant() {
				if q.Grade(name) == 2 {
					want = append(want, name)
				}
			}
			r.Failures = append(r.Failures, Failure{ID: q.ID, Kind: q.Kind, Split: q.Split, Text: q.Text, First: first, Rank: qs.Rank, Want: want, Violations: o.Violations})
		}
	}
	for _, s := range append(mapValues(r.Kinds), &r.Overall) {
		if s.N > 0 {
			n := float64(s.N)
			s.RecallAt1, s.RecallAt5, s.MRR, s.NDCG10 = s.RecallAt1/n, s.RecallAt5/n, s.MRR/n, s.NDCG10/n
		}
	}
	if r.Overall.N > 0 {
		r.FalseRejectionRate = float64(r.Overall.Rejected) / float64(r.Overall.N)
	}
	if r.NoAnswer > 0 {
		r.RejectionRate = float64(rejected) / float64(r.NoAnswer)
	}
	return r
}

func mapValues(m map[string]*Scores) []*Scores {
	out := make([]*Scores, 0, len(m))
	for _, k := range Kinds {
		if s, ok := m[k]; ok {
			out = append(out, s)
		}
	}
	return out
}
