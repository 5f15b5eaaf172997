package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

// AppendStreamChunk implements toolplane.StreamStore. The call's row is
// locked while the chunk takes the next number, so appends racing on one
// call (two workers running it after a lost lease) are numbered one after
// the other; a call that does not exist takes no chunk.
func (s *Store) AppendStreamChunk(ctx context.Context, c *toolplane.StreamChunk) error {
	data := c.Data
	if len(data) == 0 {
		data = []byte("null")
	}
	var seq int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM async_calls WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
			c.OrganizationID, c.CallID).Scan(&one); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO async_stream_chunks
			(organization_id, call_id, seq, cut, data, truncated, untrusted, created_at)
			SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7
			FROM async_stream_chunks WHERE organization_id = $1 AND call_id = $2
			RETURNING seq`,
			c.OrganizationID, c.CallID, c.Cut, data, c.Truncated, c.Untrusted, micros(c.CreatedAt)).Scan(&seq)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("append a chunk to async call %s: %w", c.CallID, toolplane.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("append a chunk to async call %s: %w", c.CallID, err)
	}
	c.Seq = seq
	return nil
}

// StreamChunks implements toolplane.StreamStore.
func (s *Store) StreamChunks(ctx context.Context, org, callID string, after int64, limit int) ([]toolplane.StreamChunk, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT organization_id, call_id, seq, cut, data, truncated, untrusted, created_at
		FROM async_stream_chunks WHERE organization_id = $1 AND call_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`, org, callID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("chunks of async call %s: %w", callID, err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.StreamChunk, error) {
		var c toolplane.StreamChunk
		var created int64
		err := r.Scan(&c.OrganizationID, &c.CallID, &c.Seq, &c.Cut, &c.Data, &c.Truncated, &c.Untrusted, &created)
		c.CreatedAt = fromMicros(created)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("chunks of async call %s: %w", callID, err)
	}
	return out, nil
}
