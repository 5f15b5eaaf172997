package handler

import (
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
)

// Runtime is the contract of a runtime: a way the platform runs a tool
// itself, from what its definition's binding describes (an HTTP request,
// a SQL statement), rather than through a handler compiled into the
// deployment. The registry checks a definition bound to it with its Check
// when the definition is published, and the deployment runs it through
// the Binding its Bind builds, which the invoker calls like any other: a
// new runtime is one Runtime, in the Runtimes beside the others.
type Runtime struct {
	// Kind names the runtime as a definition's binding does (http, sql).
	Kind string
	// Spec answers the part of b this runtime runs, and whether b is
	// bound to it at all. The part is the pointer b holds, never a copy:
	// a definition is not changed once built, so that pointer names the
	// spec for as long as the definition stands (the wiring keys the
	// bindings it built by it).
	Spec func(b *toolplane.Binding) (spec any, ok bool)
	// Check answers every problem of d's binding to this runtime; none
	// means it can run. It reads the definition only.
	Check func(d *toolplane.Definition) []toolplane.Problem
	// Bind builds the binding that runs d, a definition Check passed. It
	// is nil in a Runtime that only checks definitions (the registry's,
	// which runs nothing).
	Bind func(d *toolplane.Definition) (*Binding, error)
}

// BindWith answers r binding with bind: a runtime's contract, from its
// checks and the Bind of one configured runtime.
func (r Runtime) BindWith(bind func(d *toolplane.Definition) (*Binding, error)) Runtime {
	r.Bind = bind
	return r
}

// Runtimes are runtimes by kind: where a definition's binding finds the
// runtime that checks it and the one that runs it.
type Runtimes struct {
	list []Runtime
}

// ErrRuntime is the kind of a Runtime NewRuntimes refuses.
var ErrRuntime = errors.New("runtime refused")

// NewRuntimes answers the runtimes rs, refusing one without a kind, a
// Spec or a Check, and a kind given twice.
func NewRuntimes(rs ...Runtime) (*Runtimes, error) {
	seen := map[string]bool{}
	for _, r := range rs {
		switch {
		case r.Kind == "" || r.Spec == nil || r.Check == nil:
			return nil, fmt.Errorf("%w: runtime %q needs a kind, a Spec and a Check", ErrRuntime, r.Kind)
		case seen[r.Kind]:
			return nil, fmt.Errorf("%w: runtime %q is given twice", ErrRuntime, r.Kind)
		}
		seen[r.Kind] = true
	}
	return &Runtimes{list: append([]Runtime(nil), rs...)}, nil
}

// For answers the runtime b is bound to, with the part of b it runs; ok
// is false when b is bound to none of them (a handler, a remote tool).
// It allocates nothing: every call of a runtime's tool asks it.
func (s *Runtimes) For(b *toolplane.Binding) (r *Runtime, spec any, ok bool) {
	for i := range s.list {
		if spec, ok := s.list[i].Spec(b); ok {
			return &s.list[i], spec, true
		}
	}
	return nil, nil, false
}

// Count answers how many of the runtimes b is bound to: a definition is
// bound to one thing only, which the registry checks.
func (s *Runtimes) Count(b *toolplane.Binding) int {
	n := 0
	for i := range s.list {
		if _, ok := s.list[i].Spec(b); ok {
			n++
		}
	}
	return n
}
