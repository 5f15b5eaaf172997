package invoke_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery/signals"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

// A caller that gives its calls less time than a healthy tool needs does
// not make that tool look unhealthy to every agent of the organization
// (discovery would rank it lower): its health, like its breaker, leaves
// out the caller's own deadline.
func TestCallerDeadlineLeavesToolHealth(t *testing.T) {
	keeper := signals.New(signals.Config{MinCalls: 5})
	healthy := def("crm.get", toolplane.EffectRead)
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { c.Observer = keeper }, tool{def: healthy, fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		select {
		case <-time.After(300 * time.Millisecond): // the tool answers in 300ms, well inside its 2s timeout
			return map[string]any{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	var codes []toolplane.Code
	for range 6 {
		in := inv("crm.get")
		in.Deadline = e.clock.Now().Add(150 * time.Millisecond)
		r, err := e.iv.Invoke(context.Background(), "crm.get", args(), in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != nil {
			codes = append(codes, r.Error.Code)
		}
	}
	h, known := keeper.Health("org-1", "crm.get")
	t.Logf("codes %v; health %v known %v", codes, h, known)
	if known && h < 1 {
		t.Errorf("the caller's own short deadlines made crm.get's health %v for the whole organization", h)
	}
}
