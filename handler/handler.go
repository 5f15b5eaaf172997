// Package handler is how Go code becomes a tool: a typed definition whose
// schemas are derived from Go input and output types, and a binding of a
// handler function to it, registered by key in a trusted Registry; and
// the contract of a runtime (Runtime), which builds such a binding from
// what a definition's binding describes. The invoker is the only caller
// of a bound handler.
//
// A handler answers its output, or an error. It never builds a Result: the
// stable codes belong to the platform. How an error ends the call is
// decided here, in order:
//
//   - DestinationRefused: the platform's egress rules refused where the
//     call was to go, before anything was sent; the claim is released, the
//     model reads unavailable and only that the destination is not
//     allowed, and the host and rule go to the operator (Outcome.Detail);
//   - the neutral upstream errors RetryableUpstream and Unavailable: nothing
//     happened downstream; the invoker may attempt the call again inside
//     its time (see retry.go), and in the end the claim is released and
//     the model reads retryable_upstream or unavailable, with the
//     downstream's Retry-After as its retry hint;
//   - CredentialRefused: the downstream refused the credential the broker
//     released for the call before doing anything, the claim is released,
//     the model reads connection_expired (the broker may add where the
//     person connects again);
//   - the declared business errors NotFound, Invalid and Conflict (matched
//     by their exact type): a definite answer, the claim completes, the
//     model reads not_found, invalid_input or conflict;
//   - an error carrying its own Ending (an *EndingError, as the platform's
//     runtimes answer), or otherwise the binding's classify function:
//     Explain (a definite failure the model reads), Uncertain (the effect
//     may have happened: the claim is held until a reconciliation), or
//     Raise;
//   - anything left raises: a platform fault that stops the caller, never a
//     confident answer.
package handler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane/boundary"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

// Call is what a handler learns about the call besides its input.
type Call struct {
	Invocation *toolplane.Invocation
	// Tool is the platform name; Version the definition version.
	Tool    string
	Version string
	// Key is the call's idempotency key. A write that is safe to replay
	// passes it downstream, so a repeat after a lost worker is one effect
	// at the vendor too.
	Key string
	// Attempt counts handler starts for this key, from 1.
	Attempt int
	// Released is the connection, with its secret, the broker released
	// for this call, for a tool that runs on one; nil otherwise. A handler
	// presents it to the downstream only: it never answers, logs or
	// stores it, and never changes it (calls share its Connection).
	Released *toolplane.Released
}

// RetryableUpstream reports a transient upstream failure (a 429, a 503)
// that made no effect. The invoker may attempt the call again within its
// time (see WithKeyedDownstream for a write); in the end the claim is
// released and the model may retry.
type RetryableUpstream struct {
	Err error
	// After is how long the downstream asked to be left alone (its
	// Retry-After); zero when it said nothing. The invoker waits that
	// long before another attempt when the call's time allows it, and
	// otherwise stops and tells the caller.
	After time.Duration
}

func (e *RetryableUpstream) Error() string { return "retryable upstream failure: " + errString(e.Err) }
func (e *RetryableUpstream) Unwrap() error { return e.Err }

// Unavailable reports that the upstream cannot serve the request (down,
// unreachable). Nothing happened: the invoker may attempt the call again
// within its time, as for RetryableUpstream, and in the end the claim is
// released. A refusal no second attempt can change (a target the
// downstream does not serve) is an Explain(CodeUnavailable) instead.
type Unavailable struct {
	Err error
	// After is the downstream's Retry-After, as RetryableUpstream's.
	After time.Duration
}

func (e *Unavailable) Error() string { return "upstream unavailable: " + errString(e.Err) }
func (e *Unavailable) Unwrap() error { return e.Err }

// DestinationRefused reports that the platform's egress rules refused the
// destination a runtime was to reach for the call (a host not on its
// connection's list, an address the rules refuse), so nothing was sent.
// Host, Addr and Rule are the operator's to read: the invoker logs them
// and writes them in the call's audit event. A model is told only that the
// destination is not allowed, since which addresses a deployment refuses,
// and what a name resolves to inside it, are the deployment's own.
type DestinationRefused struct {
	// Host is the destination as the call named it; Addr the address
	// refused, when the refusal was of an address.
	Host, Addr string
	// Rule says what refused it.
	Rule string
}

func (e *DestinationRefused) Error() string { return "destination refused: " + e.Detail() }

// Detail is the refusal as the operator reads it: the host, the address
// when it is another, and the rule.
func (e *DestinationRefused) Detail() string {
	if e.Addr == "" || e.Addr == e.Host {
		return "egress refused " + e.Host + ": " + e.Rule
	}
	return "egress refused " + e.Host + " at " + e.Addr + ": " + e.Rule
}

// DestinationNotAllowed is all a model reads of a DestinationRefused.
const DestinationNotAllowed = "the destination of this call is not allowed by the egress rules of its connection, and nothing was sent; " +
	"calling again will not help: tell the user an administrator must allow it"

// CredentialRefused reports that the downstream refused the credential
// of the connection the broker released for the call (an HTTP 401, or a
// 403 for want of scope) before it acted on the request. Nothing
// happened; the claim is released and the call answers
// connection_expired: the connection must be authorized again before a
// call through it can succeed. Err says what the downstream answered; it
// never holds the credential.
type CredentialRefused struct{ Err error }

func (e *CredentialRefused) Error() string {
	return "the downstream refused the connection's credential: " + errString(e.Err)
}
func (e *CredentialRefused) Unwrap() error { return e.Err }

// NotFound is a business answer: the thing asked for does not exist.
type NotFound struct{ Message string }

func (e *NotFound) Error() string { return e.Message }

// Invalid is a business answer: the arguments are well formed but the
// domain refuses them (an amount above the order total).
type Invalid struct {
	Message   string
	FieldPath string
}

func (e *Invalid) Error() string { return e.Message }

// Conflict is a business answer: the request conflicts with current state.
type Conflict struct{ Message string }

func (e *Conflict) Error() string { return e.Message }

func errString(err error) string {
	if err == nil {
		return "no detail"
	}
	return err.Error()
}

// Ending is how a handler's error ends the call: what a classify function
// decides of it, or what an EndingError carries.
type Ending struct {
	kind    endingKind
	code    toolplane.Code
	message string
	// again and after: see Retryable.
	again bool
	after time.Duration
	// answered: see Answered.
	answered bool
}

type endingKind int

const (
	endRaise endingKind = iota
	endExplain
	endUncertain
)

// toolCodes are the codes a tool may answer with. Every other code is the
// platform's: a handler that could answer denied or budget_exhausted could
// stop a run or impersonate a policy.
var toolCodes = map[toolplane.Code]bool{
	toolplane.CodeNotFound:          true,
	toolplane.CodeConflict:          true,
	toolplane.CodeInvalidInput:      true,
	toolplane.CodeUnavailable:       true,
	toolplane.CodeRetryableUpstream: true,
}

// ToolCode reports whether a handler may answer with code.
func ToolCode(code toolplane.Code) bool { return toolCodes[code] }

// Explain ends the call with a definite failure the model reads: message
// under code, which must be a tool code (not_found, conflict,
// invalid_input, unavailable, retryable_upstream). The claim completes,
// unless the code is retryable, in which case it is released. An
// explained retryable_upstream is a transient failure the invoker may
// attempt again; any other code only when marked Retryable.
func Explain(code toolplane.Code, message string) Ending {
	return Ending{kind: endExplain, code: code, message: message}
}

// Uncertain ends the call as an uncertain action: the effect may have
// happened. The claim is held and identical calls answer uncertain until a
// person, or the handler's late settlement, reconciles it.
func Uncertain(reason string) Ending { return Ending{kind: endUncertain, message: reason} }

// Raise ends the call as a platform fault.
func Raise() Ending { return Ending{} }

// Retryable marks an Explain or Uncertain ending as transient: another
// attempt may answer otherwise (a 5xx, an answer lost on the way back).
// after is the pause the downstream asked for (its Retry-After), zero
// when it said nothing. Marking states a fact about the downstream, not
// a wish: the invoker makes another attempt only where it cannot double
// an effect, which for an Uncertain ending (an effect that may have
// happened) is a binding WithKeyedDownstream.
func (e Ending) Retryable(after time.Duration) Ending {
	if e.kind != endRaise {
		e.again, e.after = true, max(after, 0)
	}
	return e
}

// Answered marks an ending the downstream itself gave: it was reached
// and answered, refusing (a credential it will not take, a quota it
// enforces), so however the model is told (unavailable, say) the ending
// says nothing against the downstream's health, and no circuit breaker
// counts it as a failure.
func (e Ending) Answered() Ending {
	e.answered = true
	return e
}

// Err answers the ending as an error a handler returns: Classify ends the
// call as the ending says, whatever the binding's classify function, so a
// runtime needs none of its own.
func (e Ending) Err() error { return &EndingError{Ending: e} }

// EndingError is an error that says how it ends the call (see Ending.Err).
type EndingError struct{ Ending Ending }

// Error answers the ending's message or reason, as the model reads it:
// a runtime may quote one attempt's ending in the next's.
func (e *EndingError) Error() string {
	if e.Ending.kind == endRaise {
		return "the call ended in a platform fault"
	}
	return e.Ending.message
}

// Outcome is how the invoker must end a call, derived from a handler's
// error by Classify.
type Outcome struct {
	// Result is the model-facing failure, for Definite and Release.
	Result toolplane.Result
	Kind   OutcomeKind
	// Reason explains an Uncertain outcome to the person reconciling it.
	Reason string
	// Detail, when set, is what the operator reads of the ending and the
	// model does not (the host and rule of a DestinationRefused): the
	// invoker logs it and records it as the audit event's reason.
	Detail string
	// Quoted is true when Result's message or Reason holds the handler's
	// own text (a business error's message, a classify function's
	// explanation) rather than the platform's. For a tool whose answers
	// come from outside, that text did too, and is labelled untrusted.
	Quoted bool
	// Retry is true when another attempt may end otherwise: the failure
	// was transient (RetryableUpstream, Unavailable, an explained
	// retryable_upstream, an ending marked Retryable). Whether one is made
	// is the invoker's decision.
	Retry bool
	// After is the pause the downstream asked for before another attempt.
	After time.Duration
	// Answered is true when the downstream itself gave this ending (see
	// Ending.Answered): a breaker counts it as the downstream answering.
	Answered bool
}

// OutcomeKind says what becomes of the claim.
type OutcomeKind int

// The outcome kinds.
const (
	// Fault: raise a platform error; the claim is released.
	Fault OutcomeKind = iota
	// Definite: a stable answer; the claim completes with it.
	Definite
	// Release: nothing happened; the claim is released.
	Release
	// Held: the effect may have happened; the claim becomes uncertain.
	Held
)

// Classify maps a handler error to its outcome, in the order the package
// documentation gives.
func (b *Binding) Classify(err error) Outcome {
	var (
		retry   *RetryableUpstream
		unav    *Unavailable
		dest    *DestinationRefused
		refused *CredentialRefused
		nf      *NotFound
		inv     *Invalid
		conf    *Conflict
		ended   *EndingError
	)
	switch {
	case errors.As(err, &dest):
		return Outcome{Kind: Release, Result: toolplane.Fail(toolplane.CodeUnavailable, DestinationNotAllowed), Detail: dest.Detail()}
	case errors.As(err, &retry):
		return Outcome{Kind: Release, Result: toolplane.Fail(toolplane.CodeRetryableUpstream, "the upstream service failed temporarily and nothing was done; try again shortly"),
			Retry: true, After: max(retry.After, 0)}
	case errors.As(err, &unav):
		return Outcome{Kind: Release, Result: toolplane.Fail(toolplane.CodeUnavailable, "the upstream service is unavailable and nothing was done; try again later or use another tool"),
			Retry: true, After: max(unav.After, 0)}
	case errors.As(err, &refused):
		return Outcome{Kind: Release, Result: toolplane.Fail(toolplane.CodeConnectionExpired, "the service refused the credential of the connection this call went out with, and nothing was done; the connection must be authorized again. Ask the user to reconnect, then call again.")}
	case errors.As(err, &nf):
		return Outcome{Kind: Definite, Result: toolplane.Fail(toolplane.CodeNotFound, clean(nf.Message)), Quoted: true}
	case errors.As(err, &inv):
		r := toolplane.Fail(toolplane.CodeInvalidInput, clean(inv.Message))
		r.Error.FieldPath = inv.FieldPath
		return Outcome{Kind: Definite, Result: r, Quoted: true}
	case errors.As(err, &conf):
		return Outcome{Kind: Definite, Result: toolplane.Fail(toolplane.CodeConflict, clean(conf.Message)), Quoted: true}
	case errors.As(err, &ended):
		return ended.Ending.outcome()
	case b.classify == nil:
		return Outcome{Kind: Fault}
	}
	return b.classify(err).outcome()
}

// outcome is how the ending a handler's error was given ends the call.
func (e Ending) outcome() Outcome {
	switch e.kind {
	case endExplain:
		if !toolCodes[e.code] {
			return Outcome{Kind: Fault} // a handler never answers a platform code
		}
		r := toolplane.Fail(e.code, clean(e.message))
		again := e.again || e.code == toolplane.CodeRetryableUpstream
		if e.code.Retryable() {
			return Outcome{Kind: Release, Result: r, Quoted: true, Retry: again, After: e.after, Answered: e.answered}
		}
		// A definite answer stands, whatever its ending says of retrying.
		return Outcome{Kind: Definite, Result: r, Quoted: true}
	case endUncertain:
		return Outcome{Kind: Held, Reason: clean(e.message), Quoted: true, Retry: e.again, After: e.after}
	}
	return Outcome{Kind: Fault}
}

// maxMessage bounds a handler's message: it is text a model reads, and a
// handler (or the vendor behind it) does not get to hand it an unbounded
// payload through an error.
const maxMessage = 1024

// clean makes a handler's message safe for a model, as the result boundary
// makes its data: control characters removed, credentials redacted, length
// bounded. A vendor's error text can echo a request's headers or a key.
func clean(msg string) string {
	s, _ := boundary.Redact(boundary.Normalize(msg)).(string)
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Func is an untyped handler body: it receives the validated, coerced
// arguments as plain JSON values and answers any Go value the result
// boundary can render.
type Func func(ctx context.Context, call Call, args any) (any, error)

// PreviewFunc renders the one-line approval summary of a call. It runs on a
// call nobody has allowed yet, so it must read only: no write, no send, no
// metered call.
type PreviewFunc func(ctx context.Context, call Call, args any) (string, error)

// Binding is a handler bound to a key, with how its errors end a call.
type Binding struct {
	Key      string
	fn       Func
	classify func(error) Ending
	preview  PreviewFunc
	// settleWithin is how long a stopped handler may still settle its call.
	settleWithin time.Duration
	// contextBound: the handler returns once its context ends.
	contextBound bool
	// keyed and transactional: see WithKeyedDownstream and
	// WithTransactionalAttempts.
	keyed, transactional bool
	// facts are the policy facts registered with the handler.
	facts policy.Facts
	// target names the downstream the handler reaches (see WithTarget).
	target string
}

// Option configures a Binding.
type Option func(*Binding)

// WithPreview adds an approval preview.
func WithPreview(p PreviewFunc) Option { return func(b *Binding) { b.preview = p } }

// WithSettlement lets a handler that is stopped (its timeout passed) still
// settle its call: when it returns within d after being stopped, its answer
// reconciles the uncertain action the stop made. d is 1ms to 24h.
func WithSettlement(d time.Duration) Option { return func(b *Binding) { b.settleWithin = d } }

// WithContextBound declares that the handler returns promptly once its
// context ends (its work is a request bound to that context, say). The
// invoker can then run a read on the caller's goroutine, since the
// deadline alone stops it, instead of handing it to a goroutine of its own
// so that a handler which ignores the deadline cannot hold the caller.
func WithContextBound() Option { return func(b *Binding) { b.contextBound = true } }

// WithFact registers, with the handler, the resolver of a policy fact the
// handler's tool declares (policy_facts): a value its organization's
// rules need that only the handler's domain knows (the account an order
// belongs to, say). Registry.Register registers it with the binding, as
// Registry.RegisterFact would; a name registered twice is refused there.
func WithFact(name string, r policy.FactResolver) Option {
	return func(b *Binding) {
		if b.facts == nil {
			b.facts = policy.Facts{}
		}
		b.facts[name] = r
	}
}

// WithTarget names the downstream the handler reaches: a host, a
// database, an upstream server. Calls that fail against one target trip
// the circuit breaker of (tool, target), and the calls in flight to it are
// capped together, so one struggling downstream is isolated from the
// rest. Without it the target is the handler's key.
func WithTarget(target string) Option { return func(b *Binding) { b.target = target } }

// Target answers the downstream the binding reaches: what WithTarget
// named, or the handler's key.
func (b *Binding) Target() string {
	if b.target != "" {
		return b.target
	}
	return b.Key
}

// ContextBound reports whether the binding was declared WithContextBound.
func (b *Binding) ContextBound() bool { return b.contextBound }

// BindFunc binds an untyped handler body under key. classify may be nil:
// every error it would see then raises.
func BindFunc(key string, fn Func, classify func(error) Ending, opts ...Option) (*Binding, error) {
	if key == "" || fn == nil {
		return nil, fmt.Errorf("bind %q: a key and a function are required", key)
	}
	b := &Binding{Key: key, fn: fn, classify: classify}
	for _, o := range opts {
		o(b)
	}
	if b.settleWithin != 0 && (b.settleWithin < time.Millisecond || b.settleWithin > 24*time.Hour) {
		return nil, fmt.Errorf("bind %q: settlement window %v is outside 1ms..24h", key, b.settleWithin)
	}
	return b, nil
}

// Invoke runs the handler body. Only the invoker calls it.
func (b *Binding) Invoke(ctx context.Context, call Call, args any) (any, error) {
	return b.fn(ctx, call, args)
}

// Preview runs the preview, when the binding has one.
func (b *Binding) Preview(ctx context.Context, call Call, args any) (string, bool, error) {
	if b.preview == nil {
		return "", false, nil
	}
	s, err := b.preview(ctx, call, args)
	return s, true, err
}

// HasPreview reports whether the binding renders previews.
func (b *Binding) HasPreview() bool { return b.preview != nil }

// SettleWithin answers the settlement window; zero means none.
func (b *Binding) SettleWithin() time.Duration { return b.settleWithin }

type usageKey struct{}

// usage is where a metered handler reports what its call cost.
type usage struct {
	mu           sync.Mutex
	cents, units int64
	reported     bool
	fault        error
}

// ErrNotMetered: ReportUsage was called outside a metered call.
var ErrNotMetered = errors.New("usage reported outside a metered call")

// ReportUsage records what the current call cost, from what the provider
// reported. Only a successful billable response is written to the meter:
// the invoker writes one usage row when the call succeeds, and none for a
// failure. Calling it twice replaces the earlier report.
func ReportUsage(ctx context.Context, cents, units int64) error {
	u, ok := ctx.Value(usageKey{}).(*usage)
	if !ok {
		return ErrNotMetered
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cents, u.units, u.reported = cents, units, true
	return nil
}

// ReportUsageFault records that the current call could not be priced: its
// downstream answered, but what it answered does not say what the call
// cost in a form the meter can count (a price field missing, negative or
// past its bound). The invoker then treats the call as it treats a meter
// that failed: the answer is withheld and the call answers a platform
// fault, since data the run cannot count must not reach it. A fault
// outranks any usage reported before or after it.
func ReportUsageFault(ctx context.Context, err error) error {
	u, ok := ctx.Value(usageKey{}).(*usage)
	if !ok {
		return ErrNotMetered
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fault == nil {
		u.fault = err
	}
	return nil
}

// Metering is what a metered handler reported of its call: the cost and
// units (Reported when it said), or the fault that kept it from pricing
// the call.
type Metering struct {
	Cents, Units int64
	Reported     bool
	Fault        error
}

// WithUsage prepares ctx for a metered call; read answers what the handler
// reported. Only the invoker calls it.
func WithUsage(ctx context.Context) (_ context.Context, read func() Metering) {
	u := &usage{}
	return context.WithValue(ctx, usageKey{}, u), func() Metering {
		u.mu.Lock()
		defer u.mu.Unlock()
		return Metering{Cents: u.cents, Units: u.units, Reported: u.reported, Fault: u.fault}
	}
}
