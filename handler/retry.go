package handler

// A call is attempted again, inside its time, only where a second attempt
// cannot make a second effect. A read is safe when its definition says
// retry: safe. A write or send is safe only by what its binding declares
// of the downstream, since the invoker cannot see what a handler does:
// WithKeyedDownstream or WithTransactionalAttempts. Without either, a
// write is attempted once.

// WithKeyedDownstream declares that the handler sends the call's
// idempotency key (Call.Key, or a value derived from it alone) with every
// request, and that the downstream honours it: a request repeated with
// the same key is recognised and makes no second effect. The invoker may
// then attempt a write again after a transient failure, even one that
// may have acted (an Uncertain ending marked Retryable), and every
// attempt carries the same key. Declare it only when both halves hold:
// a key the downstream ignores makes each attempt a new effect.
func WithKeyedDownstream() Option { return func(b *Binding) { b.keyed = true } }

// WithTransactionalAttempts declares that a write's transient failures
// (RetryableUpstream, Unavailable, an explained retryable_upstream) made
// no effect at all, by construction: each attempt runs in a transaction
// that such a failure rolls back, as a database write does. The invoker
// may then attempt the write again after one of them. An ending that may
// have acted (Uncertain: a COMMIT whose answer was lost) is never
// attempted again on this ground.
func WithTransactionalAttempts() Option { return func(b *Binding) { b.transactional = true } }

// KeyedDownstream reports whether the binding was declared
// WithKeyedDownstream.
func (b *Binding) KeyedDownstream() bool { return b.keyed }

// TransactionalAttempts reports whether the binding was declared
// WithTransactionalAttempts.
func (b *Binding) TransactionalAttempts() bool { return b.transactional }
