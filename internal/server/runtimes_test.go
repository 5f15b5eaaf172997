package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/registry"
)

// TestRuntimeContractIsTheOneDispatch proves that a runtime given
// through the contract is the one that checks the definitions bound to
// it when the registry builds, and the one that runs them: a runtime
// that takes binding.sql for its own statements, which the sql runtime
// would refuse, is asked by both, and nothing else decides.
func TestRuntimeContractIsTheOneDispatch(t *testing.T) {
	t.Parallel()
	var checked, bound atomic.Int64
	probe := handler.Runtime{
		Kind: "probe",
		Spec: func(b *toolplane.Binding) (any, bool) { return b.SQL, b.SQL != nil },
		Check: func(d *toolplane.Definition) []toolplane.Problem {
			checked.Add(1)
			if !strings.HasPrefix(d.Binding.SQL.Statement, "answer ") {
				return []toolplane.Problem{{Field: "binding.sql.statement", Message: "not a probe", Fix: "write answer <text>"}}
			}
			return nil
		},
		Bind: func(d *toolplane.Definition) (*handler.Binding, error) {
			bound.Add(1)
			text := strings.TrimPrefix(d.Binding.SQL.Statement, "answer ")
			return handler.BindFunc("probe:"+d.Name, func(context.Context, handler.Call, any) (any, error) {
				return map[string]any{"text": text}, nil
			}, nil)
		},
	}
	set, err := handler.NewRuntimes(probe)
	if err != nil {
		t.Fatal(err)
	}
	def := func(name, statement string) toolplane.Definition {
		return toolplane.Definition{
			Name: name, Version: "1.0.0", Description: "Answers what its statement says.",
			InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
			Kind: toolplane.KindInternal, Effect: toolplane.EffectRead, Connection: "probe",
			Binding: toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: statement}},
		}
	}

	_, _, err = registry.Build([]toolplane.Definition{def("probe.refused", "SELECT 1")}, registry.Options{Runtimes: set})
	var ce *registry.CheckError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Message != "not a probe" || ce.Problems[0].Tool != "probe.refused" {
		t.Fatalf("a definition the probe refuses: %v; want the probe's one problem", err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{def("probe.echo", "answer hello")}, registry.Options{Runtimes: set})
	if err != nil {
		t.Fatalf("a definition the probe accepts (and the sql runtime would refuse): %v", err)
	}
	if checked.Load() != 2 {
		t.Errorf("the probe checked %d definitions, want 2", checked.Load())
	}

	run := &runtimes{set: set}
	tool, ok := reg.Get("", "probe.echo")
	if !ok {
		t.Fatal("probe.echo is not in the registry")
	}
	b, err := run.Binding(&tool.Def)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := run.Binding(&tool.Def); err != nil || again != b || bound.Load() != 1 {
		t.Errorf("the same definition again: %p, %v, bound %d times; want %p, bound once", again, err, bound.Load(), b)
	}
	out, err := b.Invoke(t.Context(), handler.Call{}, map[string]any{})
	if err != nil || out.(map[string]any)["text"] != "hello" {
		t.Errorf("the probe's binding answered %v, %v; want its text", out, err)
	}

	// A deployment whose runtimes do not include the probe runs none of
	// its tools, and a contract that only checks binds nothing.
	for name, rs := range map[string][]handler.Runtime{"without the probe": nil, "the probe's checks only": {{Kind: probe.Kind, Spec: probe.Spec, Check: probe.Check}}} {
		other, err := newRuntimes(rs...)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := other.Binding(&tool.Def); err == nil {
			t.Errorf("%s: bound %s as %s", name, tool.Def.Name, b.Key)
		}
	}
}

// Two organizations may publish the same name and version with the same
// request, one a read and the other a write: each is bound as what it
// is, never with the binding the other's first call built (a read's
// binding retries a lost answer, which a write must never do).
func TestBindingsAreTheDefinitionsOwn(t *testing.T) {
	t.Parallel()
	probe := handler.Runtime{
		Kind:  "probe",
		Spec:  func(b *toolplane.Binding) (any, bool) { return b.SQL, b.SQL != nil },
		Check: func(*toolplane.Definition) []toolplane.Problem { return nil },
		Bind: func(d *toolplane.Definition) (*handler.Binding, error) {
			return handler.BindFunc("probe:"+string(d.Effect), func(context.Context, handler.Call, any) (any, error) { return nil, nil }, nil)
		},
	}
	run, err := newRuntimes(probe)
	if err != nil {
		t.Fatal(err)
	}
	def := func(effect toolplane.Effect) *toolplane.Definition {
		// A binding of its own, as each organization's published version
		// is decoded into: only the pointer-free key can tell them apart.
		return &toolplane.Definition{Name: "orders.sync", Version: "1.0.0", SchemaHash: "h", Connection: "erp", Effect: effect,
			Binding: toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: "UPDATE orders SET synced = true"}}}
	}
	read, err := run.Binding(def(toolplane.EffectRead))
	if err != nil {
		t.Fatal(err)
	}
	write, err := run.Binding(def(toolplane.EffectWrite))
	if err != nil {
		t.Fatal(err)
	}
	if read == write || write.Key != "probe:write" {
		t.Fatalf("the write was bound as %q, the read as %q: one binding served both", write.Key, read.Key)
	}
	again, err := run.Binding(def(toolplane.EffectWrite))
	if err != nil || again != write {
		t.Fatalf("the same write again: %v, a binding of its own; want the one built", err)
	}
}
