package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

const asyncCallColumns = sqlstore.AsyncCallColumns

func scanAsyncCall(r scanner) (toolplane.AsyncCall, error) {
	var (
		c                toolplane.AsyncCall
		created, updated int64
		started, ended   *int64
		nextAt           *int64
		status, cb       string
	)
	err := r.Scan(&c.OrganizationID, &c.ID, &c.Tool, &c.Key, &c.AgentID, &c.Arguments, &c.Invocation, &status, &c.Result, &c.Code,
		&c.ApprovalID, &c.CancelRequested, &c.CallbackURL, &cb, &c.CallbackAttempts, &created, &updated, &started, &ended, &c.Runner, &c.UserID,
		&c.CallbackError, &nextAt)
	c.Status, c.CallbackState = toolplane.AsyncStatus(status), toolplane.CallbackState(cb)
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	c.StartedAt, c.EndedAt = fromOptMicros(started), fromOptMicros(ended)
	c.CallbackNextAt = fromOptMicros(nextAt)
	return c, err
}

// InsertAsyncCall implements toolplane.AsyncCallStore.
func (s *Store) InsertAsyncCall(ctx context.Context, c *toolplane.AsyncCall) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO async_calls (`+asyncCallColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)`,
		c.OrganizationID, c.ID, c.Tool, c.Key, c.AgentID, blob(c.Arguments), blob(c.Invocation), string(c.Status), blob(c.Result), c.Code,
		c.ApprovalID, c.CancelRequested, c.CallbackURL, string(c.CallbackState), c.CallbackAttempts,
		micros(c.CreatedAt), micros(c.UpdatedAt), optMicros(c.StartedAt), optMicros(c.EndedAt), c.Runner, c.UserID,
		c.CallbackError, optMicros(c.CallbackNextAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert async call %s: %w", c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert async call %s: %w", c.ID, err)
	}
	return nil
}

// GetAsyncCall implements toolplane.AsyncCallStore.
func (s *Store) GetAsyncCall(ctx context.Context, org, id string) (*toolplane.AsyncCall, error) {
	c, err := scanAsyncCall(s.pool.QueryRow(ctx, `SELECT `+asyncCallColumns+` FROM async_calls WHERE organization_id = $1 AND id = $2`, org, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get async call %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get async call %s: %w", id, err)
	}
	return &c, nil
}

// FindAsyncCall implements toolplane.AsyncCallStore.
func (s *Store) FindAsyncCall(ctx context.Context, org, tool, key string) (*toolplane.AsyncCall, error) {
	if key == "" {
		return nil, fmt.Errorf("find async call of %s: no key: %w", tool, toolplane.ErrNotFound)
	}
	c, err := scanAsyncCall(s.pool.QueryRow(ctx, `SELECT `+asyncCallColumns+` FROM async_calls
		WHERE organization_id = $1 AND tool = $2 AND key = $3 AND key <> ''`, org, tool, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("find async call of %s: %w", tool, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find async call of %s: %w", tool, err)
	}
	return &c, nil
}

// MoveAsyncCall implements toolplane.AsyncCallStore.
func (s *Store) MoveAsyncCall(ctx context.Context, org, id string, from []toolplane.AsyncStatus, m toolplane.AsyncMove) (bool, error) {
	if len(from) == 0 {
		return false, nil
	}
	q := sqlstore.MoveAsyncCall(sqlstore.Postgres, org, id, from, m, micros(m.At), blob(m.Result))
	tag, err := s.pool.Exec(ctx, q.String(), q.Args()...)
	if err != nil {
		return false, fmt.Errorf("move async call %s to %s: %w", id, m.To, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RequestAsyncCancel implements toolplane.AsyncCallStore.
func (s *Store) RequestAsyncCancel(ctx context.Context, org, id string, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE async_calls SET cancel_requested = TRUE, updated_at = $1
		WHERE organization_id = $2 AND id = $3 AND status = 'running'`, micros(at), org, id)
	if err != nil {
		return false, fmt.Errorf("cancel async call %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RecordCallback implements toolplane.AsyncCallStore.
func (s *Store) RecordCallback(ctx context.Context, org, id string, r toolplane.CallbackRecord) error {
	// Only a pending callback moves, and a delivery after an expiry; the
	// attempts never go back (see toolplane.AsyncCallStore).
	tag, err := s.pool.Exec(ctx, `UPDATE async_calls SET callback_state = $1, callback_attempts = GREATEST(callback_attempts, $2),
			callback_error = $3, callback_next_at = $4, updated_at = $5
		WHERE organization_id = $6 AND id = $7 AND (callback_state = 'pending' OR ($1 = 'delivered' AND callback_state = 'expired'))`,
		string(r.State), r.Attempts, r.LastError, optMicros(r.NextAt), micros(r.At), org, id)
	if err != nil {
		return fmt.Errorf("record callback of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		// Ended by another attempt, or not there at all.
		if _, err := s.GetAsyncCall(ctx, org, id); err != nil {
			return fmt.Errorf("record callback of %s: %w", id, err)
		}
	}
	return nil
}

// ListAsyncCalls implements toolplane.AsyncCallStore.
func (s *Store) ListAsyncCalls(ctx context.Context, org, agent, after string, limit int) ([]toolplane.AsyncCall, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+asyncCallColumns+` FROM async_calls
		WHERE organization_id = $1 AND ($2 = '' OR agent_id = $2) AND id > $3
		ORDER BY id LIMIT $4`, org, agent, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list async calls: %w", err)
	}
	out, err := collect(rows, scanAsyncCall)
	if err != nil {
		return nil, fmt.Errorf("list async calls: %w", err)
	}
	return out, nil
}

// StaleAsyncCalls implements toolplane.AsyncCallStore.
func (s *Store) StaleAsyncCalls(ctx context.Context, before time.Time, limit int) ([]toolplane.AsyncCall, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+asyncCallColumns+` FROM async_calls
		WHERE (status IN ('queued', 'running') OR callback_state = 'pending') AND updated_at < $1
		ORDER BY updated_at, organization_id, id LIMIT $2`, micros(before), limit)
	if err != nil {
		return nil, fmt.Errorf("stale async calls: %w", err)
	}
	out, err := collect(rows, scanAsyncCall)
	if err != nil {
		return nil, fmt.Errorf("stale async calls: %w", err)
	}
	return out, nil
}

// DeleteEndedAsyncCalls implements toolplane.AsyncCallStore.
func (s *Store) DeleteEndedAsyncCalls(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM async_calls WHERE (organization_id, id) IN (
		SELECT organization_id, id FROM async_calls
		WHERE ended_at IS NOT NULL AND ended_at < $1 AND callback_state <> 'pending'
		ORDER BY ended_at LIMIT $2)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete ended async calls: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
