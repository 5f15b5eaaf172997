package invoke_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/metrics"
	"github.com/toolplane/toolplane/invoke"
)

// BenchmarkReadCallObserved is BenchmarkReadCallNoop with the metrics
// observing every call: what the stage laps and the metric updates add.
func BenchmarkReadCallObserved(b *testing.B) {
	store := newStore(b)
	audited := withAudit(b, store)
	e := newEnvWith(b, store, func(c *invoke.Config) {
		audited(c)
		c.Observer = metrics.New(nil, nil)
	}, tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1", "name": "Ada"})})
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
