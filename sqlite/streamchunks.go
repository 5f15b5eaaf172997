package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
)

// AppendStreamChunk implements toolplane.StreamStore. The number is taken
// in the statement that stores the chunk, and only when the call exists.
func (s *Store) AppendStreamChunk(ctx context.Context, c *toolplane.StreamChunk) error {
	var seq int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO async_stream_chunks
			(organization_id, call_id, seq, cut, data, truncated, untrusted, created_at)
			SELECT a.organization_id, a.id,
				COALESCE((SELECT MAX(seq) FROM async_stream_chunks WHERE organization_id = a.organization_id AND call_id = a.id), 0) + 1,
				?, ?, ?, ?, ?
			FROM async_calls a WHERE a.organization_id = ? AND a.id = ?
			RETURNING seq`,
			c.Cut, chunkData(c.Data), c.Truncated, c.Untrusted, micros(c.CreatedAt), c.OrganizationID, c.CallID).Scan(&seq)
	})
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := s.query(ctx, `SELECT organization_id, call_id, seq, cut, data, truncated, untrusted, created_at
		FROM async_stream_chunks WHERE organization_id = ? AND call_id = ? AND seq > ? ORDER BY seq LIMIT ?`, org, callID, after, limit)
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

// chunkData answers a chunk's data as stored: never empty, since every
// chunk is a JSON value.
func chunkData(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}
