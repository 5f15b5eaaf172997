package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

const asyncCallColumns = sqlstore.AsyncCallColumns

func scanAsyncCall(r scanner) (toolplane.AsyncCall, error) {
	var (
		c                toolplane.AsyncCall
		created, updated int64
		started, ended   sql.NullInt64
		nextAt           sql.NullInt64
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
	_, err := s.exec(ctx, `INSERT INTO async_calls (`+asyncCallColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
	c, err := scanAsyncCall(s.queryRow(ctx, `SELECT `+asyncCallColumns+` FROM async_calls WHERE organization_id = ? AND id = ?`, org, id))
	if errors.Is(err, sql.ErrNoRows) {
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
	c, err := scanAsyncCall(s.queryRow(ctx, `SELECT `+asyncCallColumns+` FROM async_calls
		WHERE organization_id = ? AND tool = ? AND key = ? AND key <> ''`, org, tool, key))
	if errors.Is(err, sql.ErrNoRows) {
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
	q := sqlstore.MoveAsyncCall(sqlstore.SQLite, org, id, from, m, micros(m.At), blob(m.Result))
	res, err := s.exec(ctx, q.String(), q.Args()...)
	if err != nil {
		return false, fmt.Errorf("move async call %s to %s: %w", id, m.To, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("move async call %s to %s: %w", id, m.To, err)
	}
	return n == 1, nil
}

// RequestAsyncCancel implements toolplane.AsyncCallStore.
func (s *Store) RequestAsyncCancel(ctx context.Context, org, id string, at time.Time) (bool, error) {
	res, err := s.exec(ctx, `UPDATE async_calls SET cancel_requested = 1, updated_at = ?
		WHERE organization_id = ? AND id = ? AND status = 'running'`, micros(at), org, id)
	if err != nil {
		return false, fmt.Errorf("cancel async call %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("cancel async call %s: %w", id, err)
	}
	return n == 1, nil
}

// RecordCallback implements toolplane.AsyncCallStore.
func (s *Store) RecordCallback(ctx context.Context, org, id string, r toolplane.CallbackRecord) error {
	// Only a pending callback moves, and a delivery after an expiry; the
	// attempts never go back (see toolplane.AsyncCallStore).
	res, err := s.exec(ctx, `UPDATE async_calls SET callback_state = ?, callback_attempts = max(callback_attempts, ?),
			callback_error = ?, callback_next_at = ?, updated_at = ?
		WHERE organization_id = ? AND id = ? AND (callback_state = 'pending' OR (? = 'delivered' AND callback_state = 'expired'))`,
		string(r.State), r.Attempts, r.LastError, optMicros(r.NextAt), micros(r.At), org, id, string(r.State))
	if err != nil {
		return fmt.Errorf("record callback of %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record callback of %s: %w", id, err)
	} else if n == 0 {
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
	rows, err := s.query(ctx, `SELECT `+asyncCallColumns+` FROM async_calls
		WHERE organization_id = ? AND (? = '' OR agent_id = ?) AND id > ?
		ORDER BY id LIMIT ?`, org, agent, agent, after, limit)
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
	rows, err := s.query(ctx, `SELECT `+asyncCallColumns+` FROM async_calls
		WHERE (status IN ('queued', 'running') OR callback_state = 'pending') AND updated_at < ?
		ORDER BY updated_at, organization_id, id LIMIT ?`, micros(before), limit)
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
	res, err := s.exec(ctx, `DELETE FROM async_calls WHERE (organization_id, id) IN (
		SELECT organization_id, id FROM async_calls
		WHERE ended_at IS NOT NULL AND ended_at < ? AND callback_state <> 'pending'
		ORDER BY ended_at LIMIT ?)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete ended async calls: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
