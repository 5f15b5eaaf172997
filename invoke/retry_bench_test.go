package invoke_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// BenchmarkReadCallRetrySafe is BenchmarkReadCallNoop for a read that may
// be retried (retry: safe, three attempts of at most 500ms each) and
// succeeds on its first: what the retry loop costs a call that never
// needs it.
func BenchmarkReadCallRetrySafe(b *testing.B) {
	store := newStore(b)
	d := def("crm.get", toolplane.EffectRead, func(d *toolplane.Definition) {
		d.Retry = toolplane.RetrySafe
		d.Execution = &toolplane.Execution{MaxAttempts: 3, AttemptTimeout: toolplane.Duration(500 * time.Millisecond)}
	})
	e := newEnvWith(b, store, withAudit(b, store), tool{def: d, fn: ok(map[string]any{"id": "p1", "name": "Ada"}),
		opts: []handler.Option{handler.WithContextBound()}})
	in := inv("crm.get")
	a := args("to", "p1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r, err := e.iv.Invoke(ctx, "crm.get", a, in); err != nil || !r.OK {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkWriteCallRetryable is BenchmarkWriteCall for a write whose
// attempts are bounded (three of at most 500ms each) and which
// succeeds on its first.
func BenchmarkWriteCallRetryable(b *testing.B) {
	store := newStore(b)
	d := def("crm.update", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.Execution = &toolplane.Execution{MaxAttempts: 3, AttemptTimeout: toolplane.Duration(500 * time.Millisecond)}
	})
	e := newEnvWith(b, store, withAudit(b, store), tool{def: d, fn: ok(map[string]any{"ok": true})})
	in := inv("crm.update")
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if r, err := e.iv.Invoke(ctx, "crm.update", args("to", time.Duration(i).String()), in); err != nil || !r.OK {
			b.Fatal(r, err)
		}
	}
}
