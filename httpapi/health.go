package httpapi

import (
	"time"
)

// toolHealth is what this node knows of a tool's traffic: its circuit
// breakers, one per downstream target the tool has called here, and its
// calls in flight here. Each node keeps its own: another node may answer
// otherwise.
type toolHealth struct {
	InFlight int           `json:"in_flight"`
	Breakers []breakerView `json:"breakers"`
}

// breakerView is one breaker as the API shows it.
type breakerView struct {
	Target string `json:"target"`
	// State is closed, open or half_open.
	State string `json:"state"`
	// Failures and Samples are the failed and all endings in the trailing
	// window.
	Failures int   `json:"failures"`
	Samples  int   `json:"samples"`
	Trips    int64 `json:"trips"`
	// OpenedAt is when it last opened; NextProbeAt, while open, when it
	// lets one call through to probe the downstream.
	OpenedAt    *time.Time `json:"opened_at,omitempty"`
	NextProbeAt *time.Time `json:"next_probe_at,omitempty"`
}

// health answers the traffic view of org's tool, nil when the node's
// protections are off.
func (s *Server) health(org, tool string) *toolHealth {
	if s.Door == nil || s.Door.Invoker == nil {
		return nil
	}
	bs, inFlight := s.Door.Invoker.Breakers(org, tool)
	if bs == nil && inFlight == 0 && !s.Door.Invoker.Protected() {
		return nil
	}
	h := &toolHealth{InFlight: inFlight, Breakers: make([]breakerView, 0, len(bs))}
	for _, b := range bs {
		v := breakerView{Target: b.Target, State: b.State.String(), Failures: b.Failures, Samples: b.Samples, Trips: b.Trips}
		if !b.OpenedAt.IsZero() {
			at := b.OpenedAt.UTC()
			v.OpenedAt = &at
		}
		if !b.NextProbe.IsZero() {
			at := b.NextProbe.UTC()
			v.NextProbeAt = &at
		}
		h.Breakers = append(h.Breakers, v)
	}
	return h
}
