package toolplane

import (
	"context"
	"fmt"
	"time"
)

// ToolEmbedding is where one embeddings model places one tool version's
// text: the vector semantic search compares a query's with. A vector is a
// pure function of the model and the text, so TextHash says whether it is
// still the version's (a tool's served text may change without a new
// version, when the operator's floors or an upstream's listing do).
type ToolEmbedding struct {
	// OrganizationID is the organization the version was published in,
	// or "" for the platform's own tools (built-in and ingested), served
	// to every organization.
	OrganizationID string
	Name, Version  string
	// Model is the embeddings model's name, as the operator configured it.
	Model string
	// TextHash is the hex SHA-256 of the text embedded.
	TextHash string
	// Vector is the embedding: little-endian IEEE 754 float32s, at most
	// MaxEmbeddingBytes.
	Vector    []byte
	CreatedAt time.Time
}

// MaxEmbeddingBytes bounds a stored vector: 16,384 dimensions, more than
// any embeddings model answers.
const MaxEmbeddingBytes = 16384 * 4

// EmbeddingStore keeps tool versions' embeddings, per organization and
// model. Every method but EachToolEmbedding is scoped to one organization.
type EmbeddingStore interface {
	// PutToolEmbedding stores e, replacing the organization's vector of
	// the version in that model if there is one. ErrInvalid when its
	// vector is empty, longer than MaxEmbeddingBytes or not whole float32s.
	PutToolEmbedding(ctx context.Context, e *ToolEmbedding) error
	// GetToolEmbedding answers the organization's vector of the version
	// in model, or ErrNotFound.
	GetToolEmbedding(ctx context.Context, org, name, version, model string) (*ToolEmbedding, error)
	// EachToolEmbedding calls fn with every organization's vectors in
	// model, in no order, until fn errs (answering its error). It is the
	// deployment's own read (a node loading its search's vectors), never
	// an answer to an organization.
	EachToolEmbedding(ctx context.Context, model string, fn func(e *ToolEmbedding) error) error
}

// Check refuses an embedding no store keeps: a vector empty, longer than
// MaxEmbeddingBytes or not whole float32s, or no model or version named.
func (e *ToolEmbedding) Check() error {
	switch {
	case e.Name == "" || e.Version == "" || e.Model == "":
		return fmt.Errorf("%w: an embedding names its tool, version and model", ErrInvalid)
	case len(e.Vector) == 0 || len(e.Vector)%4 != 0 || len(e.Vector) > MaxEmbeddingBytes:
		return fmt.Errorf("%w: an embedding of %d bytes: give 1 to %d whole float32s", ErrInvalid, len(e.Vector), MaxEmbeddingBytes/4)
	}
	return nil
}
