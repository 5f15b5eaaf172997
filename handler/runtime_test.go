package handler

import (
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
)

// specOf is the Spec of a runtime that runs binding.sql.
func specOf(b *toolplane.Binding) (any, bool) { return b.SQL, b.SQL != nil }

func noProblems(*toolplane.Definition) []toolplane.Problem { return nil }

func TestNewRuntimesRefusesAnIncompleteOrRepeatedRuntime(t *testing.T) {
	t.Parallel()
	ok := Runtime{Kind: "sql", Spec: specOf, Check: noProblems}
	for name, rs := range map[string][]Runtime{
		"no kind":    {{Spec: specOf, Check: noProblems}},
		"no spec":    {{Kind: "sql", Check: noProblems}},
		"no check":   {{Kind: "sql", Spec: specOf}},
		"kind twice": {ok, ok},
	} {
		if _, err := NewRuntimes(rs...); !errors.Is(err, ErrRuntime) {
			t.Errorf("%s: err = %v, want ErrRuntime", name, err)
		}
	}
	if _, err := NewRuntimes(ok); err != nil {
		t.Fatal(err)
	}
}

// For answers the runtime a binding is bound to with the pointer the
// binding holds (the wiring keys on it), and none for a handler's. Not
// parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestRuntimesFindTheBindingsRuntime(t *testing.T) {
	rs, err := NewRuntimes(
		Runtime{Kind: "http", Spec: func(b *toolplane.Binding) (any, bool) { return b.HTTP, b.HTTP != nil }, Check: noProblems},
		Runtime{Kind: "sql", Spec: specOf, Check: noProblems},
	)
	if err != nil {
		t.Fatal(err)
	}
	stmt := &toolplane.SQLBinding{Statement: "SELECT 1"}
	r, spec, ok := rs.For(&toolplane.Binding{SQL: stmt})
	if !ok || r.Kind != "sql" || spec != any(stmt) {
		t.Errorf("sql binding: %v %v %v, want the sql runtime and its statement", r, spec, ok)
	}
	if r, _, ok := rs.For(&toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "k"}}); ok {
		t.Errorf("a handler's binding found runtime %q", r.Kind)
	}
	both := &toolplane.Binding{SQL: stmt, HTTP: &toolplane.HTTPBinding{}}
	if n := rs.Count(both); n != 2 {
		t.Errorf("a binding to both counts %d runtimes, want 2", n)
	}
	if n := testing.AllocsPerRun(100, func() { rs.For(both) }); n != 0 {
		t.Errorf("For allocates %v times, want none", n)
	}
}
