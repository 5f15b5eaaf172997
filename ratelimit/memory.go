package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Memory is a Store in this node's memory: the embedded default, and what
// a node decides on when its shared store does not answer (see Shared).
// It decides on the now it is given.
type Memory struct {
	mu    sync.Mutex
	keys  map[string]*tats
	swept time.Time
}

// tats is one key's state: its TAT, and its retry budget's.
type tats struct{ tat, retry time.Time }

// sweepEvery is how often Memory forgets keys whose budgets are whole.
const sweepEvery = time.Minute

var _ Store = (*Memory)(nil)

// NewMemory answers an empty in-memory store.
func NewMemory() *Memory { return &Memory{keys: map[string]*tats{}} }

// take is GCRA's decision for a key of TAT tat at now under q: the TAT to
// keep and the answer.
func take(tat, now time.Time, q Quota) (time.Time, State) {
	tat = later(tat, now)
	next := tat.Add(q.Interval())
	if next.Sub(now) > q.Window {
		return tat, State{Ahead: tat.Sub(now)}
	}
	return next, State{Allowed: true, Ahead: next.Sub(now)}
}

// repeat is GCRA's retry-budget move for a key of TATs t at now under q.
func repeat(t tats, now time.Time, q Quota) (tats, bool) {
	if !t.tat.After(now) {
		return t, false // nothing counted to move
	}
	r := later(t.retry, now).Add(q.Interval())
	if r.Sub(now) > q.Window {
		return t, false // retry budget spent
	}
	return tats{tat: later(t.tat.Add(-q.Interval()), now), retry: r}, true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Take decides one request of key at now (Store).
func (m *Memory) Take(_ context.Context, key string, q Quota, now time.Time) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	t := m.keys[key]
	if t == nil {
		t = &tats{}
	}
	tat, s := take(t.tat, now, q)
	if s.Allowed {
		t.tat = tat
		m.keys[key] = t
	}
	return s, nil
}

// Repeat moves one request of key to its retry budget (Store).
func (m *Memory) Repeat(_ context.Context, key string, q Quota, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.keys[key]
	if t == nil {
		return false, nil
	}
	moved, ok := repeat(*t, now, q)
	*t = moved
	return ok, nil
}

// sweep forgets, at most once per sweepEvery, the keys whose budgets are
// both whole at now: an absent key reads the same.
func (m *Memory) sweep(now time.Time) {
	if now.Sub(m.swept) < sweepEvery {
		return
	}
	for k, t := range m.keys {
		if !t.tat.After(now) && !t.retry.After(now) {
			delete(m.keys, k)
		}
	}
	m.swept = now
}
