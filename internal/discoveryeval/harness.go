package discoveryeval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolplane/toolplane/discovery"
)

// The sizes the harness measures at, as issue 33 sets them.
const (
	GrantTools    = 1_000
	LatencyTools  = 10_000
	LatencyRounds = 20
)

// Config is one run of the harness.
type Config struct {
	// Split is SplitTuning, SplitHeldOut or "all": which queries the
	// reports cover. Every split's report is computed; Split picks those
	// printed.
	Split string
	// Options are the search's (discovery/offline's for a node's
	// default).
	Options discovery.Options
	// Queries, when set, replaces the labelled query set (tests run a
	// slice of it).
	Queries []Query
	// Perf measures tokens and latency too (slower: a 10,000-version
	// registry is built).
	Perf bool
}

// Result is everything one run measured.
type Result struct {
	Thesaurus bool                `json:"thesaurus"`
	Reports   []Report            `json:"reports"`
	Tokens    *Listing            `json:"tokens,omitempty"`
	Latency   *Latency            `json:"latency,omitempty"`
	Outcomes  map[string]*Outcome `json:"-"`
}

// Run evaluates the search over the catalogue with cfg's queries.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	qs := cfg.Queries
	if qs == nil {
		var err error
		if qs, err = Queries(); err != nil {
			return nil, err
		}
	}
	opt := cfg.Options
	b, err := NewBench(Catalogue(), opt)
	if err != nil {
		return nil, err
	}
	outs, err := b.Run(ctx, qs)
	if err != nil {
		return nil, err
	}
	res := &Result{Thesaurus: opt.Thesaurus != nil, Outcomes: map[string]*Outcome{}}
	for i := range outs {
		res.Outcomes[outs[i].Query.ID] = &outs[i]
	}
	splits := []string{SplitTuning, SplitHeldOut, "all"}
	switch cfg.Split {
	case "", "all":
	case SplitTuning, SplitHeldOut:
		splits = []string{cfg.Split}
	default:
		return nil, fmt.Errorf("discoveryeval: split %q: give tuning, heldout or all", cfg.Split)
	}
	for _, s := range splits {
		res.Reports = append(res.Reports, Score(s, len(b.Candidates), outs))
	}
	if cfg.Perf {
		l, err := Tokens(GrantTools)
		if err != nil {
			return nil, err
		}
		res.Tokens = &l
		reg, err := LargeRegistry(LatencyTools)
		if err != nil {
			return nil, err
		}
		lat, err := MeasureLatency(ctx, reg, opt, qs, LatencyRounds)
		if err != nil {
			return nil, err
		}
		res.Latency = &lat
	}
	return res, nil
}

// WriteJSON writes res as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(res)
}

// WriteTable writes res as readable tables; verbose lists every failed
// query with what ranked first.
func (res *Result) WriteTable(w io.Writer, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	th := "off"
	if res.Thesaurus {
		th = "on"
	}
	fmt.Fprintf(w, "thesaurus: %s\n", th)
	for _, r := range res.Reports {
		fmt.Fprintf(w, "\nsplit %s (%d candidates)\n", r.Split, r.Tools)
		fmt.Fprintln(tw, "kind\tn\trecall@1\trecall@5\tMRR\tnDCG@10\trejected\t")
		for _, k := range Kinds {
			if s, ok := r.Kinds[k]; ok {
				row(tw, k, s)
			}
		}
		row(tw, "overall", &r.Overall)
		tw.Flush()
		fmt.Fprintf(w, "no_answer: %d queries, rejected (no good match) %.1f%%\n", r.NoAnswer, 100*r.RejectionRate)
		fmt.Fprintf(w, "answerable: false rejection %.1f%%\n", 100*r.FalseRejectionRate)
		fmt.Fprintf(w, "deprecated above its replacement: %d\n", r.DeprecatedAbove)
		if verbose && len(r.Failures) > 0 {
			fmt.Fprintf(w, "failures (%d):\n", len(r.Failures))
			for _, f := range r.Failures {
				first := f.First
				if first == "" {
					first = "(no good match)"
				}
				line := fmt.Sprintf("  %s %-12s %q -> %s", f.ID, f.Kind, f.Text, first)
				if f.Kind != KindNoAnswer {
					rank := "not in top 10"
					if f.Rank > 0 {
						rank = fmt.Sprintf("first relevant at %d", f.Rank)
					}
					line += fmt.Sprintf("; %s; want %s", rank, strings.Join(clipList(f.Want, 4), ", "))
				}
				if len(f.Violations) > 0 {
					line += "; deprecated above replacement: " + strings.Join(f.Violations, ", ")
				}
				fmt.Fprintln(w, line)
			}
		}
	}
	if l := res.Tokens; l != nil {
		fmt.Fprintf(w, "\ntools/list for a %d-tool grant\n", l.Tools)
		fmt.Fprintln(tw, "mode\tbytes\tcl100k_base\to200k_base\t")
		fmt.Fprintf(tw, "full\t%d\t%d\t%d\t\n", l.FullBytes, l.Full["cl100k_base"], l.Full["o200k_base"])
		fmt.Fprintf(tw, "meta-tools\t%d\t%d\t%d\t\n", l.MetaBytes, l.Meta["cl100k_base"], l.Meta["o200k_base"])
		tw.Flush()
	}
	if l := res.Latency; l != nil {
		fmt.Fprintf(w, "\nsearch over %d versions: rebuild %s, first search %s, p50 %s, p99 %s (%d searches)\n",
			l.Versions, l.Rebuild.Round(time.Millisecond), l.FirstSearch.Round(time.Microsecond), l.P50.Round(time.Microsecond), l.P99.Round(time.Microsecond), l.Searches)
	}
	return nil
}

func row(w io.Writer, name string, s *Scores) {
	fmt.Fprintf(w, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t\n", name, s.N, s.RecallAt1, s.RecallAt5, s.MRR, s.NDCG10, s.Rejected)
}

func clipList(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(xs[:n:n], fmt.Sprintf("(+%d)", len(xs)-n))
}
