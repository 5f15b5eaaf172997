package handler_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/policy"
)

// fact is a resolver that answers v.
func fact(v any) policy.FactResolver {
	return func(context.Context, *toolplane.Invocation, *toolplane.Definition, any) (any, error) { return v, nil }
}

func bind(t *testing.T, key string, opts ...handler.Option) *handler.Binding {
	t.Helper()
	b, err := handler.BindFunc(key, func(context.Context, handler.Call, any) (any, error) { return nil, nil }, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A registry's facts come from its bindings (WithFact) and from
// RegisterFact; a name is registered once, a nil resolver never, and a
// Register call that is refused adds nothing at all, neither its bindings
// nor their facts.
func TestRegistryFacts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// register runs on a registry that holds the binding "held",
		// with the fact "held_fact", and answers its error.
		register func(t *testing.T, r *handler.Registry) error
		fail     bool
		// keys and facts are what the registry holds after.
		keys, facts []string
	}{
		{"a binding's fact", func(t *testing.T, r *handler.Registry) error {
			return r.Register(bind(t, "b.one", handler.WithFact("order_account", fact("acct-1"))))
		}, false, []string{"b.one", "held"}, []string{"held_fact", "order_account"}},
		{"a fact apart", func(t *testing.T, r *handler.Registry) error {
			return r.RegisterFact("order_account", fact("acct-1"))
		}, false, []string{"held"}, []string{"held_fact", "order_account"}},
		{"a fact registered twice apart", func(t *testing.T, r *handler.Registry) error {
			return r.RegisterFact("held_fact", fact(1))
		}, true, []string{"held"}, []string{"held_fact"}},
		{"a nil resolver apart", func(t *testing.T, r *handler.Registry) error {
			return r.RegisterFact("order_account", nil)
		}, true, []string{"held"}, []string{"held_fact"}},
		{"a binding's fact held already", func(t *testing.T, r *handler.Registry) error {
			return r.Register(bind(t, "b.one", handler.WithFact("held_fact", fact(1))))
		}, true, []string{"held"}, []string{"held_fact"}},
		{"a binding's nil resolver", func(t *testing.T, r *handler.Registry) error {
			return r.Register(bind(t, "b.one", handler.WithFact("order_account", nil)))
		}, true, []string{"held"}, []string{"held_fact"}},
		{"one fact on two bindings of one call", func(t *testing.T, r *handler.Registry) error {
			return r.Register(bind(t, "b.one", handler.WithFact("order_account", fact(1))),
				bind(t, "b.two", handler.WithFact("order_account", fact(2))))
		}, true, []string{"held"}, []string{"held_fact"}},
		{"one key twice in one call", func(t *testing.T, r *handler.Registry) error {
			return r.Register(bind(t, "b.one", handler.WithFact("order_account", fact(1))), bind(t, "b.one"))
		}, true, []string{"held"}, []string{"held_fact"}},
		{"a key held already, after a good binding", func(t *testing.T, r *handler.Registry) error {
			return r.Register(bind(t, "b.one", handler.WithFact("order_account", fact(1))), bind(t, "held"))
		}, true, []string{"held"}, []string{"held_fact"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := handler.NewRegistry()
			if err := r.Register(bind(t, "held", handler.WithFact("held_fact", fact("held")))); err != nil {
				t.Fatal(err)
			}
			if err := tt.register(t, r); (err != nil) != tt.fail {
				t.Fatalf("register = %v, want failure %v", err, tt.fail)
			}
			if got := r.Keys(); !slices.Equal(got, tt.keys) {
				t.Errorf("Keys = %v, want %v", got, tt.keys)
			}
			facts := r.Facts()
			if got := slices.Sorted(maps.Keys(facts)); !slices.Equal(got, tt.facts) {
				t.Errorf("Facts = %v, want %v", got, tt.facts)
			}
			for _, name := range tt.facts {
				if !r.FactResolver(name) {
					t.Errorf("FactResolver(%s) = false, want true", name)
				}
			}
			if r.FactResolver("nobody_registered") {
				t.Error("FactResolver of a fact nobody registered = true")
			}
			// Facts answers a copy: changing it changes nothing held.
			delete(facts, "held_fact")
			if !r.FactResolver("held_fact") {
				t.Error("deleting from what Facts answered removed the registry's fact")
			}
		})
	}
}
