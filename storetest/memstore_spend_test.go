package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/toolplane/toolplane"
)

// errNoGrouping answers a report grouped by nothing the store knows.
var errNoGrouping = errors.New("no such grouping")

func (m *memStore) PutSpendCeiling(_ context.Context, c *toolplane.SpendCeiling, ch *toolplane.Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.appendChangeLocked(ch); err != nil {
		return err
	}
	if m.spendCeilings == nil {
		m.spendCeilings = map[string]toolplane.SpendCeiling{}
	}
	stored := *c
	stored.UpdatedAt = keep(c.UpdatedAt)
	m.spendCeilings[c.OrganizationID] = stored
	return nil
}

func (m *memStore) GetSpendCeiling(_ context.Context, org string) (*toolplane.SpendCeiling, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.spendCeilings[org]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	return &c, nil
}

func (m *memStore) DeleteSpendCeiling(_ context.Context, org string, ch *toolplane.Change) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.spendCeilings[org]; !ok {
		return false, nil
	}
	if err := m.appendChangeLocked(ch); err != nil {
		return false, err
	}
	delete(m.spendCeilings, org)
	return true, nil
}

func (m *memStore) DaySpend(_ context.Context, org string, day int64) (toolplane.DaySpend, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := toolplane.DaySpend{CeilingCents: m.spendCeilings[org].DailyCents}
	for _, u := range m.usage {
		if u.OrganizationID == org && toolplane.SpendDay(u.CreatedAt) == day {
			d.SpentCents += u.CostCents
			d.Calls++
		}
	}
	return d, nil
}

func (m *memStore) SpendReport(_ context.Context, org string, from, to time.Time, by toolplane.SpendBy, limit int) ([]toolplane.SpendLine, error) {
	if limit < 1 || limit > toolplane.MaxSpendLines {
		return nil, fmt.Errorf("limit %d", limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	lines := map[string]*toolplane.SpendLine{}
	for _, u := range m.usage {
		if u.OrganizationID != org || u.CreatedAt.Before(from) || !u.CreatedAt.Before(to) {
			continue
		}
		var k string
		switch by {
		case toolplane.SpendByAgent:
			k = u.AgentID
		case toolplane.SpendByTool:
			k = u.Tool
		case toolplane.SpendByDay:
			k = u.CreatedAt.UTC().Format(time.DateOnly)
		default:
			return nil, errNoGrouping
		}
		l := lines[k]
		if l == nil {
			l = &toolplane.SpendLine{Key: k}
			lines[k] = l
		}
		l.Calls++
		l.CostCents += u.CostCents
	}
	var out []toolplane.SpendLine
	for _, k := range slices.Sorted(maps.Keys(lines)) {
		out = append(out, *lines[k])
	}
	return out[:min(len(out), limit)], nil
}
