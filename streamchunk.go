package toolplane

import (
	"context"
	"time"
)

// StreamChunk is one piece of partial output an asynchronous call's
// handler emitted while it ran, as the result boundary left it: the
// stream a client reads (and reads again, from any node, after it lost
// its connection) before the call's final answer. Chunks of a call are
// numbered from 1, in the order they were emitted.
type StreamChunk struct {
	OrganizationID string
	// CallID is the asynchronous call's invocation id.
	CallID string
	// Seq is the chunk's number in its call's stream, from 1: set by the
	// store when it appends the chunk.
	Seq int64
	// Cut marks the stream's end by its bound: no chunk follows it, and
	// Data says which bound cut it. It is the platform's own marker,
	// which no handler output can take the form of.
	Cut bool
	// Data is the chunk's JSON, redacted and bounded as a final answer
	// is.
	Data []byte
	// Truncated is set when a bound changed the chunk; Untrusted when it
	// carries content from outside the platform.
	Truncated bool
	Untrusted bool
	CreatedAt time.Time
}

// StreamStore is the storage of asynchronous calls' streamed chunks,
// scoped to one organization. A call's chunks are removed with the call
// (AsyncCallStore.DeleteEndedAsyncCalls).
type StreamStore interface {
	// AppendStreamChunk stores c as the next chunk of its call, setting
	// c.Seq to one past the call's last chunk (1 for the first). It
	// answers an error wrapping ErrNotFound when the organization has no
	// such call.
	AppendStreamChunk(ctx context.Context, c *StreamChunk) error
	// StreamChunks answers the call's chunks numbered after after, in
	// order, at most limit.
	StreamChunks(ctx context.Context, org, callID string, after int64, limit int) ([]StreamChunk, error)
}
