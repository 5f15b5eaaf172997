// Package policy decides each call: allow it, deny it, or require a
// person's approval. The invoker asks a Policy on every call, live; it holds
// no permission check of its own, so a grant removed while a run waits is
// gone at the next decision, and every refusal is a policy decision with a
// reason.
package policy

import (
	"context"
	"fmt"
	"path"

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

// FactResolver answers the value of one policy fact for a call.
type FactResolver func(ctx context.Context, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (any, error)

// Facts is the set of fact resolvers a deployment registers.
type Facts map[string]FactResolver

// FactResolver reports whether a resolver is registered under name (the
// registry checks a tool's policy_facts against it).
func (f Facts) FactResolver(name string) bool { _, ok := f[name]; return ok }

// Resolve answers the values of the tool's declared facts.
func (f Facts) Resolve(ctx context.Context, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (map[string]any, error) {
	if len(tool.PolicyFacts) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(tool.PolicyFacts))
	for _, name := range tool.PolicyFacts {
		r, ok := f[name]
		if !ok {
			return nil, fmt.Errorf("policy fact %q has no resolver", name)
		}
		v, err := r(ctx, inv, tool, args)
		if err != nil {
			return nil, fmt.Errorf("policy fact %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}
