package resilience

import (
	"math"
	"sync"
)

// gate counts the calls each key holds, and refuses a key at its cap. A key
// holding none is forgotten, so the map is as large as what is in flight.
type gate struct {
	mu sync.Mutex
	n  map[gateKey]int
	// limits holds the cap each key holding calls was last admitted
	// under (a tool's cap is its definition's), for the metrics'
	// saturation; it is forgotten with the key.
	limits map[gateKey]int
}

// gateKey is a key of two parts (an organization and a name in it, or a
// name alone), kept apart rather than joined so that no call allocates one.
type gateKey struct{ scope, name string }

// acquire takes a slot of key, unless it holds limit already (limit 0: no
// cap).
func (g *gate) acquire(key gateKey, limit int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == nil {
		g.n, g.limits = map[gateKey]int{}, map[gateKey]int{}
	}
	c := g.n[key]
	if limit > 0 && c >= limit {
		return false
	}
	g.n[key] = c + 1
	if g.limits[key] != limit {
		g.limits[key] = limit
	}
	return true
}

func (g *gate) release(key gateKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.n[key]; c <= 1 {
		delete(g.n, key)
		delete(g.limits, key)
	} else {
		g.n[key] = c - 1
	}
}

func (g *gate) count(key gateKey) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[key]
}

// size answers how many keys hold calls.
func (g *gate) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.n)
}

// snapshotWithLimits copies the counts and the cap each key was admitted
// under (0: none), a key's parts joined by a slash.
func (g *gate) snapshotWithLimits() (counts, limits map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	counts, limits = make(map[string]int, len(g.n)), make(map[string]int, len(g.n))
	for k, v := range g.n {
		name := k.name
		if k.scope != "" {
			name = k.scope + "/" + k.name
		}
		counts[name], limits[name] = v, g.limits[k]
	}
	return counts, limits
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func floatFrom(b uint64) float64 { return math.Float64frombits(b) }
