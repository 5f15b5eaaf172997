package handler

import (
	"context"
	"errors"
)

// Emitter receives the chunks a handler emits while its call runs. Only
// the invoker attaches one (WithEmitter), to a call whose caller reads
// its stream: an asynchronous call.
type Emitter func(ctx context.Context, chunk any) error

// emitKey is the context key of a call's Emitter.
type emitKey struct{}

// WithEmitter answers ctx carrying e, the stream of the call whose
// handler runs with it. Only the invoker calls it.
func WithEmitter(ctx context.Context, e Emitter) context.Context {
	return context.WithValue(ctx, emitKey{}, e)
}

// ErrStreamCut: the call's stream reached its bound (how many chunks, or
// how many bytes in all) and takes no more chunks. The call goes on, and
// its final answer stands; a handler may stop emitting.
var ErrStreamCut = errors.New("the stream of this call reached its bound; later chunks are dropped")

// ErrStreamClosed: the call's handler emitted after its call ended (it
// ran past its timeout, say): the chunk is dropped.
var ErrStreamClosed = errors.New("the call has ended; its stream takes no more chunks")

// Emit hands chunk, a piece of the call's output produced before its
// answer (a row of a large query, a page of a multi-page fetch, a line
// of a log being tailed), to the call's stream, where its caller reads
// it before the final answer. The chunk passes the result boundary as an
// answer does: credentials redacted, outside text fenced and labelled,
// its size bounded, and the stream's total bounded too.
//
// A call without a stream (a synchronous call) drops the chunk at no
// cost beyond a context lookup, and answers nil: a handler emits without
// asking whether anyone reads. The final answer the handler returns is
// the call's answer either way; chunks never replace it.
func Emit(ctx context.Context, chunk any) error {
	e, ok := ctx.Value(emitKey{}).(Emitter)
	if !ok {
		return nil
	}
	return e(ctx, chunk)
}

// Streaming reports whether the call has a stream its chunks reach: a
// handler may skip building chunks nobody reads.
func Streaming(ctx context.Context) bool {
	_, ok := ctx.Value(emitKey{}).(Emitter)
	return ok
}
