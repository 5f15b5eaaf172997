package invoke_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

// A caller's own idempotency key names a call of its principal only: two
// agents sending the same key, or naming the same run, make two calls, and
// one never reads back the other's effect.
func TestKeyNamesThePrincipal(t *testing.T) {
	t.Parallel()
	a, b := inv(), inv()
	b.AgentID, b.Principal.ID = "agent-2", "agent-2"
	if invoke.Key(a, "sha256:h") == invoke.Key(b, "sha256:h") {
		t.Error("two agents in the same run share a key")
	}
	a.IdempotencyKey, b.IdempotencyKey = "order-7", "order-7"
	if invoke.Key(a, "sha256:h") == invoke.Key(b, "sha256:h") {
		t.Error("two agents sending the same idempotency key share a key")
	}
}

// Of a tool whose answers come from outside, what quotes the handler (a
// business error's message, an uncertain action's stored reason) is
// labelled untrusted, and the platform's own words are not.
func TestOnlyQuotedTextIsLabelledUntrusted(t *testing.T) {
	t.Parallel()
	open := func(name string, d time.Duration) toolplane.Definition {
		return def(name, toolplane.EffectWrite, func(d *toolplane.Definition) { d.Annotations.OpenWorld = true }, func(def *toolplane.Definition) {
			def.Timeout = toolplane.Duration(d)
		})
	}
	slow := func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return map[string]any{}, nil
	}
	e := newEnv(t, newStore(t),
		tool{def: open("crm.missing", 2*time.Second), fn: func(context.Context, handler.Call, any) (any, error) {
			return nil, &handler.NotFound{Message: "no customer c-9"}
		}},
		tool{def: open("crm.busy", 2*time.Second), fn: func(context.Context, handler.Call, any) (any, error) {
			return nil, &handler.RetryableUpstream{}
		}},
		tool{def: open("crm.slow", 20*time.Millisecond), fn: slow},
	)
	tests := []struct {
		tool      string
		code      toolplane.Code
		untrusted bool
	}{
		{"crm.missing", toolplane.CodeNotFound, true},
		{"crm.busy", toolplane.CodeRetryableUpstream, false},
		{"crm.slow", toolplane.CodeUncertain, true},
	}
	for _, tt := range tests {
		r, err := e.iv.Invoke(context.Background(), tt.tool, args("to", "a"), inv(tt.tool))
		code(t, r, err, tt.code)
		if r.Meta.Untrusted != tt.untrusted {
			t.Errorf("%s: %s answered untrusted=%v, want %v", tt.tool, tt.code, r.Meta.Untrusted, tt.untrusted)
		}
	}
}
