package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

var _ toolplane.EmbeddingStore = (*Store)(nil)

// PutToolEmbedding stores e, replacing the organization's vector of the
// version in that model.
func (s *Store) PutToolEmbedding(ctx context.Context, e *toolplane.ToolEmbedding) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("put tool embedding %s@%s: %w", e.Name, e.Version, err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO tool_embeddings (model, organization_id, name, version, text_hash, vector, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (model, organization_id, name, version) DO UPDATE SET
			text_hash = excluded.text_hash, vector = excluded.vector, created_at = excluded.created_at`,
		e.Model, e.OrganizationID, e.Name, e.Version, e.TextHash, e.Vector, micros(e.CreatedAt))
	if err != nil {
		return fmt.Errorf("put tool embedding %s@%s: %w", e.Name, e.Version, err)
	}
	return nil
}

// GetToolEmbedding answers the organization's vector of the version in
// model, or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetToolEmbedding(ctx context.Context, org, name, version, model string) (*toolplane.ToolEmbedding, error) {
	e := &toolplane.ToolEmbedding{OrganizationID: org, Name: name, Version: version, Model: model}
	var at int64
	err := s.pool.QueryRow(ctx, `SELECT text_hash, vector, created_at FROM tool_embeddings
		WHERE model = $1 AND organization_id = $2 AND name = $3 AND version = $4`, model, org, name, version).Scan(&e.TextHash, &e.Vector, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tool embedding %s@%s: %w", name, version, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("tool embedding %s@%s: %w", name, version, err)
	}
	e.CreatedAt = fromMicros(at)
	return e, nil
}

// EachToolEmbedding calls fn with every organization's vectors in model.
func (s *Store) EachToolEmbedding(ctx context.Context, model string, fn func(e *toolplane.ToolEmbedding) error) error {
	rows, err := s.pool.Query(ctx, `SELECT organization_id, name, version, text_hash, vector, created_at FROM tool_embeddings
		WHERE model = $1 ORDER BY organization_id, name, version`, model)
	if err != nil {
		return fmt.Errorf("tool embeddings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e := &toolplane.ToolEmbedding{Model: model}
		var at int64
		if err := rows.Scan(&e.OrganizationID, &e.Name, &e.Version, &e.TextHash, &e.Vector, &at); err != nil {
			return fmt.Errorf("tool embeddings: %w", err)
		}
		e.CreatedAt = fromMicros(at)
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("tool embeddings: %w", err)
	}
	return nil
}
