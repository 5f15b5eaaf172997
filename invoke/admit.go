package invoke

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// Admission is what Admit found of a call that may be accepted now and run
// later.
type Admission struct {
	// Tool is the version of the tool the call resolved to.
	Tool *registry.Tool
	// Key identifies the call for its once-only acceptance: two
	// acceptances with one Key are one call. It is derived from the
	// call's idempotency key (a write's, or a read's that named one) and
	// its arguments, so the same key with other arguments is another
	// call, which the journal then refuses as a conflict when it runs.
	// Empty for a read that named no key: each is a call of its own.
	Key string
}

// Admit runs the checks of the call path that record nothing (the
// caller's live principal, the tool and its version, the run or key a
// write needs, the binding's presence, a frozen contract, the arguments
// against the schema), for a call to be accepted now and run later
// through Invoke. Nothing is decided, claimed or audited: the call is
// decided when it runs, live.
//
// A refusal is answered as refused (nil, true, nil): the call would be
// refused when it ran, so the caller runs it now (InvokeJSON), which
// answers the same refusal with its span and audit event, rather than
// accept a call bound to fail. The errors are Invoke's caller errors
// (*toolplane.TooLongError, *RunRequiredError, ErrPrincipalUnavailable)
// and platform faults.
func (iv *Invoker) Admit(ctx context.Context, name string, raw []byte, inv *toolplane.Invocation) (*Admission, bool, error) {
	if err := inv.Check(name); err != nil {
		return nil, false, fmt.Errorf("invoke: %w", err)
	}
	args, refusal := registry.DecodeArguments(raw)
	if refusal != nil {
		return nil, true, nil
	}
	c := &call{iv: iv, start: iv.now(), name: name, inv: inv, argsIn: args, span: trace.SpanFromContext(context.Background())}
	if c.hops() != nil || c.lateAlready() {
		return nil, true, nil
	}
	refused, err := c.admit(ctx)
	if err != nil {
		return nil, false, err
	}
	if refused != nil || c.limit(ctx) != nil {
		// Past its rate, the call is run now to be refused with its wait.
		return nil, true, nil
	}
	a := &Admission{Tool: c.tool}
	if c.tool.Def.Writes() || inv.IdempotencyKey != "" {
		if err := c.identify(); err != nil {
			return nil, false, err
		}
		sum := sha256.Sum256([]byte(c.key + "\x00" + c.hash))
		a.Key = hex.EncodeToString(sum[:])
	}
	return a, false, nil
}

// InvokeStored runs a call accepted earlier and stored (an asynchronous
// call), as ExecuteApproved runs an approved one: its principal is read
// again, live, from the key the call was made with (revoked or narrowed
// since included), then the call takes the one path, decided then.
func (iv *Invoker) InvokeStored(ctx context.Context, name string, raw []byte, inv *toolplane.Invocation) (toolplane.Result, error) {
	if err := iv.livePrincipal(ctx, inv); err != nil {
		return toolplane.Result{}, err
	}
	return iv.InvokeJSON(ctx, name, raw, inv)
}

// Escalation answers the approval that replaced a, an approval expired
// into the next level of its tool's approval chain; "" when none did.
func (iv *Invoker) Escalation(ctx context.Context, a *toolplane.Approval) (string, error) {
	return iv.escalatedTo(ctx, a)
}

// Mode answers how org's tool named name runs by its definition (its
// default version's): async for a tool that answers later.
func (iv *Invoker) Mode(org, name string) toolplane.Mode {
	if t, ok := iv.cfg.Registry.Get(org, name); ok && t.Def.Mode == toolplane.ModeAsync {
		return toolplane.ModeAsync
	}
	return toolplane.ModeSync
}

// cancelKey is the context key of Cancellable's signal.
type cancelKey struct{}

// Cancellable answers ctx marked so that the handler of a call made with
// it is stopped (its context ends) once stop is done: a cancel its caller
// asked for, as an asynchronous call's caller does. Without it a handler
// never stops for its caller: a caller that goes away (a client that
// disconnects) does not abandon an effect half way. A handler stopped
// this way ends as one that ran out of time: a read answers timeout, and
// a write that reached its downstream is held uncertain.
func Cancellable(ctx, stop context.Context) context.Context {
	return context.WithValue(ctx, cancelKey{}, stop)
}
