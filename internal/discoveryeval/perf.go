package discoveryeval

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/registry"
)

// Latency is how fast the search is over a large index.
type Latency struct {
	// Versions is how many tool versions the index holds (and every
	// search is among).
	Versions int `json:"versions"`
	// Rebuild is the time to analyse every version into a fresh index.
	Rebuild time.Duration `json:"rebuild_ns"`
	// FirstSearch is the first search over the candidates, which builds
	// their set; later searches by the same caller reuse it.
	FirstSearch time.Duration `json:"first_search_ns"`
	// Searches is how many searches P50 and P99 are read from.
	Searches int           `json:"searches"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
}

// LargeRegistry answers a registry of the catalogue grown to n versions
// (the catalogue's deprecated older versions counted among them).
func LargeRegistry(n int) (*registry.Registry, error) {
	return Registry(Grow(n - len(superseded)))
}

// MeasureLatency rebuilds a fresh index of reg's versions, then searches
// it with every query of qs, rounds times over, in process.
func MeasureLatency(ctx context.Context, reg *registry.Registry, opt discovery.Options, qs []Query, rounds int) (Latency, error) {
	all := reg.Every()
	x := discovery.New(opt)
	start := time.Now()
	x.Rebuild(all)
	l := Latency{Versions: x.Size(), Rebuild: time.Since(start)}
	cands := reg.Tools("")
	if len(qs) == 0 {
		return l, fmt.Errorf("discoveryeval: no queries to time")
	}
	start = time.Now()
	if _, err := x.Search(ctx, "", cands, discovery.Query{Text: qs[0].Text}); err != nil {
		return l, err
	}
	l.FirstSearch = time.Since(start)
	times := make([]time.Duration, 0, rounds*len(qs))
	for range rounds {
		for _, q := range qs {
			start := time.Now()
			if _, err := x.Search(ctx, "", cands, discovery.Query{Text: q.Text, Limit: Depth}); err != nil {
				return l, err
			}
			times = append(times, time.Since(start))
		}
	}
	slices.Sort(times)
	l.Searches = len(times)
	l.P50 = times[len(times)/2]
	l.P99 = times[min(len(times)-1, len(times)*99/100)]
	return l, nil
}
