package invoke_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/resilience"
)

// BenchmarkReadCallNoop measures the platform's own overhead on a read: the
// span, validation, policy, output validation, the boundary and the audit
// append, around a handler that does nothing.
func BenchmarkReadCallNoop(b *testing.B) {
	store := newStore(b)
	e := newEnvWith(b, store, withAudit(b, store), tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1", "name": "Ada"})})
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

// BenchmarkReadCallProtected is BenchmarkReadCallNoop with the node's
// traffic protections on: what a breaker, four in-flight caps and the
// shedder's check add to every call.
func BenchmarkReadCallProtected(b *testing.B) {
	store := newStore(b)
	audited := withAudit(b, store)
	e := newEnvWith(b, store, func(c *invoke.Config) {
		audited(c)
		c.Traffic = resilience.New(resilience.Config{})
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

// BenchmarkWriteCall measures a write end to end on SQLite: journal read,
// policy, claim, dispatch mark, handler, completion and audit, each call on
// a fresh key.
func BenchmarkWriteCall(b *testing.B) {
	store := newStore(b)
	e := newEnvWith(b, store, withAudit(b, store), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{"ok": true})})
	in := inv("crm.update")
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime()
	for b.Loop() {
		i++
		if r, err := e.iv.Invoke(ctx, "crm.update", args("to", fmt.Sprint(i)), in); err != nil || !r.OK {
			b.Fatal(r, err)
		}
	}
	// The process's CPU a call (user and system): the steadier figure on
	// a shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

// BenchmarkWriteCallBesideReads is BenchmarkWriteCall while another
// goroutine makes a read call every readEvery, so the background audit
// writer commits their events while the write calls commit theirs: SQLite
// takes one writer at a time, and this measures what a write call loses to
// the other.
func BenchmarkWriteCallBesideReads(b *testing.B) {
	store := newStore(b)
	e := newEnvWith(b, store, withAudit(b, store),
		tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{"ok": true})},
		tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1", "name": "Ada"})})
	in := inv("crm.update", "crm.get")
	ctx := context.Background()
	const readEvery = 200 * time.Microsecond
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		a := args("to", "p1")
		tick := time.NewTicker(readEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if r, err := e.iv.Invoke(ctx, "crm.get", a, in); err != nil || !r.OK {
				b.Error(r, err)
				return
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if r, err := e.iv.Invoke(ctx, "crm.update", args("to", fmt.Sprint(i)), in); err != nil || !r.OK {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkWriteCallReplayed measures an identical write answered from the
// journal.
func BenchmarkWriteCallReplayed(b *testing.B) {
	store := newStore(b)
	e := newEnvWith(b, store, withAudit(b, store), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{"ok": true})})
	in := inv("crm.update")
	ctx := context.Background()
	if _, err := e.iv.Invoke(ctx, "crm.update", args("to", "x"), in); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := e.iv.Invoke(ctx, "crm.update", args("to", "x"), in); err != nil || !r.Meta.Replayed {
			b.Fatal(r, err)
		}
	}
}
