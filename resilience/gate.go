package resilience

import (
	"math"
	"strings"
	"sync"
)

// gate counts the calls each key holds, and refuses a key at its cap. A key
// holding none is forgotten, so the map is as large as what is in flight.
type gate struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes a slot of key, unless it holds limit already (limit 0: no
// cap).
func (g *gate) acquire(key string, limit int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == nil {
		g.n = map[string]int{}
	}
	c := g.n[key]
	if limit > 0 && c >= limit {
		return false
	}
	g.n[key] = c + 1
	return true
}

func (g *gate) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.n[key]; c <= 1 {
		delete(g.n, key)
	} else {
		g.n[key] = c - 1
	}
}

func (g *gate) count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[key]
}

// snapshot copies the counts, a key's NUL separator replaced by sep.
func (g *gate) snapshot(sep string) map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.n))
	for k, v := range g.n {
		if sep != "" {
			k = strings.ReplaceAll(k, "\x00", sep)
		}
		out[k] = v
	}
	return out
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func floatFrom(b uint64) float64 { return math.Float64frombits(b) }
