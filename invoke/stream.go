package invoke

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/handler"
)

// StreamLimits bound what one call streams (see Streamed). Zero fields
// take their defaults.
type StreamLimits struct {
	// ChunkBytes bounds one chunk's encoded data, below the tool's own
	// bound on an answer; default (and at most) the tool's bound.
	ChunkBytes int
	// TotalBytes bounds the encoded data of all of a call's chunks;
	// default DefaultStreamBytes.
	TotalBytes int
	// Chunks bounds how many chunks a call streams; default
	// DefaultStreamChunks.
	Chunks int
}

// The default bounds of a call's stream.
const (
	DefaultStreamBytes  = 1 << 20
	DefaultStreamChunks = 1000
)

// withDefaults answers l with its zero fields defaulted.
func (l StreamLimits) withDefaults() StreamLimits {
	if l.TotalBytes <= 0 {
		l.TotalBytes = DefaultStreamBytes
	}
	if l.Chunks <= 0 {
		l.Chunks = DefaultStreamChunks
	}
	return l
}

// ChunkSink stores the chunks of a streamed call, in the order given: the
// invoker hands it each chunk once the result boundary shaped it
// (Data, Truncated, Untrusted and Cut set), and the sink numbers and
// keeps it.
type ChunkSink interface {
	Chunk(ctx context.Context, c *toolplane.StreamChunk) error
}

// streamKey is the context key of Streamed's sink.
type streamKey struct{}

// Streamed answers ctx marked so that a call made with it streams what
// its handler emits (handler.Emit) to sink, as an asynchronous call's
// worker does. Every chunk passes the result boundary the call's answer
// passes (redaction, outside text fenced and labelled untrusted, the
// byte bound), and the stream as a whole is bounded by Config.Stream:
// the chunk that would pass a bound is replaced by a Cut marker saying
// which, and nothing is streamed after it. The call's answer is what it
// would be without a stream.
func Streamed(ctx context.Context, sink ChunkSink) context.Context {
	return context.WithValue(ctx, streamKey{}, sink)
}

// stream is one call's stream while its handler runs.
type stream struct {
	c    *call
	sink ChunkSink
	lim  StreamLimits

	// mu orders the chunks: one is shaped and stored before the next.
	mu     sync.Mutex
	n      int // chunks stored
	bytes  int // their data's bytes
	cut    bool
	closed bool
}

// newStream answers the stream of c, or nil when its caller reads none.
func (c *call) newStream(ctx context.Context) *stream {
	sink, ok := ctx.Value(streamKey{}).(ChunkSink)
	if !ok || sink == nil {
		return nil
	}
	return &stream{c: c, sink: sink, lim: c.iv.cfg.Stream.withDefaults()}
}

// emit is the call's handler.Emitter.
func (s *stream) emit(ctx context.Context, chunk any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return handler.ErrStreamClosed
	case s.cut:
		return handler.ErrStreamCut
	}
	data, meta := s.c.tool.Chunk(chunk, s.lim.ChunkBytes)
	enc := boundary.Encode(nil, data)
	switch {
	case s.n >= s.lim.Chunks:
		return s.cutHere(ctx, "too_many_chunks", s.lim.Chunks)
	case s.bytes+len(enc) > s.lim.TotalBytes:
		return s.cutHere(ctx, "too_large", s.lim.TotalBytes)
	}
	// The store's write is the platform's, not the handler's: a handler
	// stopped mid-write must not leave a chunk half stored.
	if err := s.sink.Chunk(context.WithoutCancel(ctx), &toolplane.StreamChunk{Data: enc, Truncated: meta.Truncated, Untrusted: meta.Untrusted}); err != nil {
		s.c.iv.log.ErrorContext(ctx, "a streamed chunk was not stored", "tool", s.c.tool.Def.Name, "err", err)
		return fmt.Errorf("the chunk could not be stored: %w", err)
	}
	s.n++
	s.bytes += len(enc)
	return nil
}

// cutMarker is the data of a Cut marker: which bound cut the stream.
type cutMarker struct {
	Reason string `json:"reason"`
	Limit  int    `json:"limit"`
}

// cutHere stores the marker that the stream's bound cut it, and ends
// the stream.
func (s *stream) cutHere(ctx context.Context, reason string, limit int) error {
	s.cut = true
	data, _ := json.Marshal(cutMarker{Reason: reason, Limit: limit})
	if err := s.sink.Chunk(context.WithoutCancel(ctx), &toolplane.StreamChunk{Cut: true, Data: data}); err != nil {
		s.c.iv.log.ErrorContext(ctx, "a stream's cut was not stored", "tool", s.c.tool.Def.Name, "err", err)
	}
	return handler.ErrStreamCut
}

// started reports whether the stream's reader has been sent anything; a
// nil stream (no reader) never has.
func (s *stream) started() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n > 0 || s.cut
}

// close ends the stream when the call ends: a handler still running (one
// past its timeout) streams nothing more.
func (s *stream) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
