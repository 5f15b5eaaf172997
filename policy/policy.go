// Package policy decides each call: allow it, deny it, or require a
// person's approval. The invoker asks a Policy on every call, live; it holds
// no permission check of its own, so a grant removed while a run waits is
// gone at the next decision, and every refusal is a policy decision with a
// reason.
package policy

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/toolplane/toolplane"
)

// Effect is a decision.
type Effect int

// The decisions.
const (
	Deny Effect = iota
	Allow
	RequireApproval
)

func (e Effect) String() string {
	return [...]string{"deny", "allow", "require_approval"}[e]
}

// MarshalText writes the effect's name, the form bundle tests expect.
func (e Effect) MarshalText() ([]byte, error) {
	if e < Deny || e > RequireApproval {
		return nil, fmt.Errorf("policy: unknown effect %d", int(e))
	}
	return []byte(e.String()), nil
}

// UnmarshalText reads an effect's name.
func (e *Effect) UnmarshalText(b []byte) error {
	switch string(b) {
	case "deny":
		*e = Deny
	case "allow":
		*e = Allow
	case "require_approval":
		*e = RequireApproval
	default:
		return fmt.Errorf("policy: unknown effect %q (want allow, deny or require_approval)", b)
	}
	return nil
}

// Decision is a policy's answer, with the reason recorded in the audit trail
// and, for a denial, shown to the model.
type Decision struct {
	Effect Effect
	Reason string
	// Rule names the rule that decided, when an organization's rules did
	// ("" for the built-in grants check): what explain shows and the audit
	// event records.
	Rule string
	// Bundle is the version of the organization's rules that decided, 0
	// when none was published.
	Bundle int64
	// Approval routes a RequireApproval decision: who must approve.
	Approval *Approval
	// Degraded marks a decision taken from the last known good rules
	// while the store could not be read (a fail-open read-only tool).
	Degraded bool
	// Input is the document the organization's rules decided on (or
	// would have, had any been published), credentials redacted, as the
	// call's audit event keeps it for a shadow run to replay; nil when
	// the grants refused the call. A string (JSON text) keeps a Decision
	// comparable.
	Input string
}

// Input is what a policy decides on.
type Input struct {
	Invocation *toolplane.Invocation
	Tool       *toolplane.Definition
	// Arguments are the validated, coerced arguments.
	Arguments any
	// Facts holds the values of the tool's policy_facts, resolved before the
	// decision because a policy may not query domain data itself.
	Facts map[string]any
	// Sensitive lists the JSON pointers of the arguments the tool's input
	// schema marks x-sensitive (as schema.Schema.Sensitive answers them):
	// rules read where such values are, and whatever records the decision
	// keeps none of them.
	Sensitive []string
}

// Policy decides calls. An error is a fault of the policy (it could not
// decide), never a denial: the invoker answers internal_error and stops.
type Policy interface {
	Decide(ctx context.Context, in Input) (Decision, error)
}

// Grants is the built-in policy: the principal must hold the tool's name; a
// deny pattern always wins; a tool annotated requires_approval needs a
// person.
type Grants struct {
	// Deny lists glob patterns (path.Match syntax over platform names, such
	// as "payments.*") no principal may call, whatever its grants.
	Deny []string
}

// Decide implements Policy.
func (g Grants) Decide(_ context.Context, in Input) (Decision, error) {
	name := in.Tool.Name
	for _, p := range g.Deny {
		ok, err := path.Match(p, name)
		if err != nil {
			return Decision{}, fmt.Errorf("deny pattern %q: %w", p, err)
		}
		if ok {
			return Decision{Effect: Deny, Reason: fmt.Sprintf("%s is on the deny list (%s)", name, p)}, nil
		}
	}
	if !in.Invocation.Principal.Holds(name) {
		return Decision{Effect: Deny, Reason: fmt.Sprintf("the principal is not granted %s", name)}, nil
	}
	if in.Tool.Annotations.RequiresApproval {
		return Decision{Effect: RequireApproval, Reason: fmt.Sprintf("%s requires a person's approval", name)}, nil
	}
	return Decision{Effect: Allow, Reason: "granted"}, nil
}

// FactResolver answers the value of one policy fact for a call. It is
// given a context that ends at the fact's deadline and must return by
// then; an error is a fault of the platform (the call is not decided, and
// nothing runs), never an answer a rule could read as "no".
type FactResolver func(ctx context.Context, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (any, error)

// Facts is the set of fact resolvers a deployment registers.
type Facts map[string]FactResolver

// FactResolver reports whether a resolver is registered under name (the
// registry checks a tool's policy_facts against it).
func (f Facts) FactResolver(name string) bool { _, ok := f[name]; return ok }

// DefaultFactTimeout bounds the resolution of each fact when the caller
// names no bound: a fact is read on every call of its tool, before the
// decision, so a slow one delays every such call.
const DefaultFactTimeout = time.Second

// ErrFactTimeout is the cause of a FactError whose resolver did not
// answer within its deadline.
var ErrFactTimeout = errors.New("the resolver did not answer within its deadline")

// FactError is a fact that could not be resolved: its resolver failed,
// panicked, or ran past its deadline (Err wraps ErrFactTimeout). The call
// it was resolved for is a fault, decided neither way.
type FactError struct {
	Fact string
	Err  error
}

func (e *FactError) Error() string { return fmt.Sprintf("policy fact %q: %v", e.Fact, e.Err) }

// Unwrap answers the cause.
func (e *FactError) Unwrap() error { return e.Err }

// Resolve answers the values of the tool's declared facts, each bounded by
// DefaultFactTimeout.
func (f Facts) Resolve(ctx context.Context, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (map[string]any, error) {
	return f.ResolveWithin(ctx, DefaultFactTimeout, inv, tool, args)
}

// ResolveWithin answers the values of the tool's declared facts, each
// given limit (<= 0: DefaultFactTimeout) to answer. The first that fails
// answers a *FactError and the rest are not asked. A resolver that
// ignores its context is not waited for past its deadline: it is left to
// finish on its own, and its late answer is dropped.
func (f Facts) ResolveWithin(ctx context.Context, limit time.Duration, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (map[string]any, error) {
	if len(tool.PolicyFacts) == 0 {
		return nil, nil
	}
	if limit <= 0 {
		limit = DefaultFactTimeout
	}
	out := make(map[string]any, len(tool.PolicyFacts))
	for _, name := range tool.PolicyFacts {
		r, ok := f[name]
		if !ok {
			return nil, &FactError{Fact: name, Err: errors.New("no resolver is registered")}
		}
		v, err := resolveOne(ctx, limit, r, inv, tool, args)
		if err != nil {
			return nil, &FactError{Fact: name, Err: err}
		}
		out[name] = v
	}
	return out, nil
}

// resolveOne runs one resolver under its deadline, a panic counted as its
// failure.
func resolveOne(ctx context.Context, limit time.Duration, r FactResolver, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (any, error) {
	fctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type answer struct {
		v   any
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- answer{err: fmt.Errorf("the resolver panicked: %v", p)}
			}
		}()
		v, err := r(fctx, inv, tool, args)
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil && fctx.Err() != nil && ctx.Err() == nil {
			// It gave up because its deadline passed.
			return nil, fmt.Errorf("%w (%v): %v", ErrFactTimeout, limit, a.err)
		}
		return a.v, a.err
	case <-fctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w (%v)", ErrFactTimeout, limit)
	}
}
