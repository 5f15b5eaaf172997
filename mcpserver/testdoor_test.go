package mcpserver

import (
	"log/slog"

	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/registry"
)

// NewTestDoor answers the door layer the tests' servers sit on, as the
// server's wiring builds one: calls run by iv, tools shown from reg, API
// keys found (and their use recorded) in store, what it logs discarded. A
// test sets what else it needs (Limiter, Failures, Keys, Tokens, Authz,
// RunBudgetCents) on the door answered before its server serves. It is
// the one helper both the package's tests and its external tests use
// (exported from a test file, it exists only in the test binary).
func NewTestDoor(iv *invoke.Invoker, reg *registry.Registry, store apikey.Getter) *door.Door {
	return &door.Door{Invoker: iv, Registry: reg, Store: store, Log: slog.New(slog.DiscardHandler)}
}
