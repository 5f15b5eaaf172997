package sqlite

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// TrafficCells answers q's calls counted per tool, agent, outcome and
// latency bucket, read from the audit trail's traffic index.
func (s *Store) TrafficCells(ctx context.Context, q toolplane.TrafficQuery) ([]toolplane.TrafficCell, error) {
	text, args, ok := sqlstore.TrafficCells(sqlstore.SQLite, q)
	if !ok {
		return nil, nil
	}
	rows, err := s.query(ctx, text, args...)
	if err != nil {
		return nil, fmt.Errorf("traffic cells: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.TrafficCell, error) {
		var c toolplane.TrafficCell
		err := r.Scan(&c.Tool, &c.AgentID, &c.Outcome, &c.Latency, &c.Calls, &c.CostCents)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("traffic cells: %w", err)
	}
	return out, nil
}

// TrafficSeries answers q's calls counted per step and outcome.
func (s *Store) TrafficSeries(ctx context.Context, q toolplane.TrafficQuery) ([]toolplane.TrafficPoint, error) {
	text, args, ok := sqlstore.TrafficSeries(sqlstore.SQLite, q)
	if !ok {
		return nil, nil
	}
	rows, err := s.query(ctx, text, args...)
	if err != nil {
		return nil, fmt.Errorf("traffic series: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.TrafficPoint, error) {
		var p toolplane.TrafficPoint
		err := r.Scan(&p.Step, &p.Outcome, &p.Calls, &p.CostCents)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("traffic series: %w", err)
	}
	return out, nil
}
