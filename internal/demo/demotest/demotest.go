// Package demotest builds the demo catalogue into a registry for tests only,
// so every test package that needs a working catalogue starts from the same
// fixture instead of carrying its own copy of the wiring.
package demotest

import (
	"testing"

	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/registry"
)

// Bindings answers the registry's binding checks from a handler registry
// alone: the test catalogues bind handlers only, so no tool may name a
// connection, and a fact resolver only when a handler registered it
// (handler.WithFact).
type Bindings struct{ *handler.Registry }

// Connection reports that no connection exists, because test catalogues
// built on Bindings run without a credential broker.
func (Bindings) Connection(string) bool { return false }

// Registry builds a fresh demo helpdesk's catalogue into a published
// registry and the handler registry its tools are bound to. Each call has
// its own helpdesk state, so parallel tests do not see each other's notes
// or refunds. Any failure stops the test, since nothing can run without it.
func Registry(t testing.TB) (*registry.Registry, *handler.Registry) {
	t.Helper()
	defs, bs, err := demo.New().Catalogue()
	if err != nil {
		t.Fatalf("demotest: demo catalogue: %v", err)
	}
	hs := handler.NewRegistry()
	if err := hs.Register(bs...); err != nil {
		t.Fatalf("demotest: register demo handlers: %v", err)
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: Bindings{hs}})
	if err != nil {
		t.Fatalf("demotest: build demo registry: %v", err)
	}
	return reg, hs
}
