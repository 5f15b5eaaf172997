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
		g.n = map[gateKey]int{}
	}
	c := g.n[key]
	if limit > 0 && c >= limit {
		return false
	}
	g.n[key] = c + 1
	return true
}

func (g *gate) release(key gateKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.n[key]; c <= 1 {
		delete(g.n, key)
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

// snapshot copies the counts, a key's parts joined by a slash.
func (g *gate) snapshot() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.n))
	for k, v := range g.n {
		name := k.name
		if k.scope != "" {
			name = k.scope + "/" + k.name
		}
		out[name] = v
	}
	return out
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func floatFrom(b uint64) float64 { return math.Float64frombits(b) }
