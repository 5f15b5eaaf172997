package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// InsertNode stores a new instance n, or answers an error wrapping
// toolplane.ErrExists when one with its ID is stored.
func (s *Store) InsertNode(ctx context.Context, n *toolplane.Node) error {
	_, err := s.exec(ctx, `INSERT INTO nodes (id, name, started_at, heartbeat_at) VALUES (?, ?, ?, ?)`,
		n.ID, n.Name, micros(n.StartedAt), micros(n.HeartbeatAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert node %s: %w", n.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert node %s: %w", n.ID, err)
	}
	return nil
}

// Heartbeat moves a live instance's stored heartbeat forward; a heartbeat
// older than the one stored (a delayed write) changes nothing. It only
// updates: a retired instance, or one retention removed since, is not
// revived, so a late heartbeat of a process gone changes nothing.
func (s *Store) Heartbeat(ctx context.Context, n *toolplane.Node) error {
	_, err := s.exec(ctx, `UPDATE nodes SET heartbeat_at = max(heartbeat_at, ?) WHERE id = ? AND heartbeat_at <> 0`, micros(n.HeartbeatAt), n.ID)
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", n.ID, err)
	}
	return nil
}

// GetNode answers the node instance, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetNode(ctx context.Context, id string) (*toolplane.Node, error) {
	var (
		n          toolplane.Node
		start, hbt int64
	)
	err := s.queryRow(ctx, `SELECT id, name, started_at, heartbeat_at FROM nodes WHERE id = ?`, id).
		Scan(&n.ID, &n.Name, &start, &hbt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get node %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", id, err)
	}
	n.StartedAt, n.HeartbeatAt = time.UnixMicro(start).UTC(), time.UnixMicro(hbt).UTC()
	return &n, nil
}

// RetireNodes marks the other instances named name dead.
func (s *Store) RetireNodes(ctx context.Context, name, except string) (int, error) {
	res, err := s.exec(ctx, `UPDATE nodes SET heartbeat_at = 0 WHERE name = ? AND id <> ? AND heartbeat_at <> 0`, name, except)
	if err != nil {
		return 0, fmt.Errorf("retire nodes %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("retire nodes %s: %w", name, err)
	}
	return int(n), nil
}

// OrphanedClaims answers processing claims held by node instances whose
// last heartbeat is before deadBefore, across organizations, at most limit.
// It finds the dead instances first (nodes_by_heartbeat), then their
// processing claims (claims_by_node), so it reads no claim of a live node.
func (s *Store) OrphanedClaims(ctx context.Context, deadBefore time.Time, limit int) ([]toolplane.Claim, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("orphaned claims: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+claimSelect+` FROM claims
		WHERE status = 'processing' AND node IN (SELECT id FROM nodes WHERE heartbeat_at < ?)
		LIMIT ?`, micros(deadBefore), limit)
	if err != nil {
		return nil, fmt.Errorf("orphaned claims: %w", err)
	}
	cs, err := collect(rows, scanClaim)
	if err != nil {
		return nil, fmt.Errorf("orphaned claims: %w", err)
	}
	return cs, nil
}

// DeleteDeadNodes removes at most limit node instances whose last
// heartbeat is before before and that hold no processing claim, and
// answers how many it removed.
func (s *Store) DeleteDeadNodes(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete dead nodes: %w", err)
	}
	res, err := s.exec(ctx, `DELETE FROM nodes WHERE id IN (
		SELECT id FROM nodes n WHERE heartbeat_at < ?
			AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.node = n.id AND c.status = 'processing')
		LIMIT ?)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete dead nodes: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete dead nodes: %w", err)
	}
	return int(n), nil
}
