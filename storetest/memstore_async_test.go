package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

func (m *memStore) InsertAsyncCall(_ context.Context, c *toolplane.AsyncCall) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.asyncCalls[[2]string{c.OrganizationID, c.ID}]; ok {
		return fmt.Errorf("insert async call %s: %w", c.ID, toolplane.ErrExists)
	}
	if c.Key != "" {
		for _, o := range m.asyncCalls {
			if o.OrganizationID == c.OrganizationID && o.Tool == c.Tool && o.Key == c.Key {
				return fmt.Errorf("insert async call %s: %w", c.ID, toolplane.ErrExists)
			}
		}
	}
	v := *c
	v.CreatedAt, v.UpdatedAt, v.StartedAt, v.EndedAt = keep(v.CreatedAt), keep(v.UpdatedAt), keep(v.StartedAt), keep(v.EndedAt)
	m.asyncCalls[[2]string{c.OrganizationID, c.ID}] = v
	return nil
}

func (m *memStore) GetAsyncCall(_ context.Context, org, id string) (*toolplane.AsyncCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.asyncCalls[[2]string{org, id}]
	if !ok {
		return nil, fmt.Errorf("get async call %s: %w", id, toolplane.ErrNotFound)
	}
	return &c, nil
}

func (m *memStore) FindAsyncCall(_ context.Context, org, tool, key string) (*toolplane.AsyncCall, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.asyncCalls {
		if key != "" && c.OrganizationID == org && c.Tool == tool && c.Key == key {
			return &c, nil
		}
	}
	return nil, fmt.Errorf("find async call of %s: %w", tool, toolplane.ErrNotFound)
}

func (m *memStore) MoveAsyncCall(_ context.Context, org, id string, from []toolplane.AsyncStatus, mv toolplane.AsyncMove) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.asyncCalls[[2]string{org, id}]
	if !ok || !slices.Contains(from, c.Status) {
		return false, nil
	}
	at := keep(mv.At)
	c.Status, c.UpdatedAt = mv.To, at
	if mv.To == toolplane.AsyncRunning {
		if c.StartedAt.IsZero() {
			c.StartedAt = at
		}
		c.Runner = mv.Runner
	}
	if mv.To == toolplane.AsyncQueued {
		c.Runner = ""
	}
	if mv.To.Terminal() {
		c.EndedAt, c.Result, c.Code = at, mv.Result, mv.Code
		if c.CallbackURL != "" {
			c.CallbackState = toolplane.CallbackPending
		}
	}
	if mv.ApprovalID != "" {
		c.ApprovalID = mv.ApprovalID
	}
	m.asyncCalls[[2]string{org, id}] = c
	return true, nil
}

func (m *memStore) RequestAsyncCancel(_ context.Context, org, id string, at time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.asyncCalls[[2]string{org, id}]
	if !ok || c.Status != toolplane.AsyncRunning {
		return false, nil
	}
	c.CancelRequested, c.UpdatedAt = true, keep(at)
	m.asyncCalls[[2]string{org, id}] = c
	return true, nil
}

func (m *memStore) RecordCallback(_ context.Context, org, id string, r toolplane.CallbackRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.asyncCalls[[2]string{org, id}]
	if !ok {
		return fmt.Errorf("record callback of %s: %w", id, toolplane.ErrNotFound)
	}
	if c.CallbackState != toolplane.CallbackPending && (r.State != toolplane.CallbackDelivered || c.CallbackState != toolplane.CallbackExpired) {
		return nil
	}
	c.CallbackState, c.CallbackAttempts, c.UpdatedAt = r.State, max(c.CallbackAttempts, r.Attempts), keep(r.At)
	c.CallbackError, c.CallbackNextAt = r.LastError, keep(r.NextAt)
	m.asyncCalls[[2]string{org, id}] = c
	return nil
}

func (m *memStore) StaleAsyncCalls(_ context.Context, before time.Time, limit int) ([]toolplane.AsyncCall, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.AsyncCall
	for _, c := range m.asyncCalls {
		if (!c.Status.Terminal() || c.CallbackState == toolplane.CallbackPending) && c.UpdatedAt.Before(keep(before)) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b toolplane.AsyncCall) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		if a.OrganizationID != b.OrganizationID {
			return map[bool]int{true: -1, false: 1}[a.OrganizationID < b.OrganizationID]
		}
		return map[bool]int{true: -1, false: 1}[a.ID < b.ID]
	})
	return out[:min(limit, len(out))], nil
}

func (m *memStore) DeleteEndedAsyncCalls(_ context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, c := range m.asyncCalls {
		if n < limit && !c.EndedAt.IsZero() && c.EndedAt.Before(keep(before)) && c.CallbackState != toolplane.CallbackPending {
			delete(m.asyncCalls, k)
			delete(m.streams, k)
			n++
		}
	}
	return n, nil
}

func (m *memStore) ListAsyncCalls(_ context.Context, org, agent, after string, limit int) ([]toolplane.AsyncCall, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.AsyncCall
	for _, c := range m.asyncCalls {
		if c.OrganizationID == org && (agent == "" || c.AgentID == agent) && c.ID > after {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b toolplane.AsyncCall) int { return strings.Compare(a.ID, b.ID) })
	return out[:min(limit, len(out))], nil
}

func (m *memStore) AppendStreamChunk(_ context.Context, c *toolplane.StreamChunk) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{c.OrganizationID, c.CallID}
	if _, ok := m.asyncCalls[k]; !ok {
		return fmt.Errorf("append a chunk to async call %s: %w", c.CallID, toolplane.ErrNotFound)
	}
	v := *c
	v.Seq = int64(len(m.streams[k])) + 1
	v.CreatedAt = keep(v.CreatedAt)
	if len(v.Data) == 0 {
		v.Data = []byte("null")
	}
	v.Data = slices.Clone(v.Data)
	m.streams[k] = append(m.streams[k], v)
	c.Seq = v.Seq
	return nil
}

func (m *memStore) StreamChunks(_ context.Context, org, callID string, after int64, limit int) ([]toolplane.StreamChunk, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []toolplane.StreamChunk
	for _, c := range m.streams[[2]string{org, callID}] {
		if c.Seq > after && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}
