package invoke_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/internal/allocbudget"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/sqlite"
)

// The allocation budgets of a call in process (issue 35): each is a little
// above the figure measured when it was set, so a change that allocates
// more per call fails here rather than in a profile months later. An
// optimisation that lowers the figure lowers its budget in the same change.
const (
	// budgetReadCall: measured 45 allocs per call, its event stored alone
	// (2026-12-06, after the audit insert outside a transaction and the
	// cuts beside it; 80 before them, 85 at 879b4e3d).
	budgetReadCall = 48
	// budgetWriteCall: measured 160 allocs per call (2026-12-06, after the
	// write path's cuts and the audit insert's: the group queue reused,
	// statements looked up without boxing, the journal's miss unformatted,
	// the completion written as the fields it changes, a one-statement
	// write queued without closures, one detached context and one boxed
	// claim time; 275-276 at 879b4e3d).
	budgetWriteCall = 170
)

// budgetRuns is how many calls a budget averages over: a multiple of the
// SQLite store's checkpoint look (every 16 commits), so each measurement
// holds the same number of looks.
const budgetRuns = 160

// signalled is the test's SQLite store as the audit writer sees it, telling
// stored of every event it stored: a read call's event is stored after the
// call returns, by the writer's goroutine, and a budget waits for it, so
// the store's allocations for it are counted within the call they belong
// to and never in the next one, or after the measurement ends.
type signalled struct {
	*sqlite.Store
	stored chan int
}

func (s *signalled) AppendAudit(ctx context.Context, e *toolplane.AuditEvent) error {
	defer func() { s.stored <- 1 }()
	return s.Store.AppendAudit(ctx, e)
}

func (s *signalled) AppendAuditBatch(ctx context.Context, events []*toolplane.AuditEvent) error {
	defer func() { s.stored <- len(events) }()
	return s.Store.AppendAuditBatch(ctx, events)
}

// TestAllocBudgetReadCall is BenchmarkReadCallNoop's call, audit writer
// included: the call returns with its event queued, and the measured
// function waits until the writer has stored it (alone, after the
// writer's linger: one event a call).
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetReadCall(t *testing.T) {
	allocbudget.Skip(t)
	st := &signalled{Store: newStore(t), stored: make(chan int, 16)}
	e := newEnvWith(t, st.Store, func(c *invoke.Config) {
		w := audit.NewWriter(audit.WriterConfig{Store: st, Logger: c.Logger})
		t.Cleanup(w.Close)
		c.Audit = w
	}, tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1", "name": "Ada"})})
	in := inv("crm.get")
	a := args("to", "p1")
	ctx := context.Background()
	allocbudget.Check(t, "call", budgetReadCall, 20, budgetRuns, func() {
		if r, err := e.iv.Invoke(ctx, "crm.get", a, in); err != nil || !r.OK {
			t.Fatal(r, err)
		}
		if n := <-st.stored; n != 1 {
			t.Fatalf("the writer stored %d events at once, want the call's one", n)
		}
	})
}

// TestAllocBudgetWriteCall is BenchmarkWriteCall's call on SQLite: journal
// read, policy, claim, dispatch mark, handler, completion and its audit
// event (stored before the call returns), each call on a fresh key.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetWriteCall(t *testing.T) {
	allocbudget.Skip(t)
	store := newStore(t)
	e := newEnvWith(t, store, withAudit(t, store), tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{"ok": true})})
	in := inv("crm.update")
	ctx := context.Background()
	// Each call's arguments are made before the measurement: a fresh key
	// each, without counting what making them costs.
	keys := make([]map[string]any, 20+budgetRuns+1)
	for i := range keys {
		keys[i] = args("to", fmt.Sprint(i))
	}
	i := 0
	allocbudget.Check(t, "call", budgetWriteCall, 20, budgetRuns, func() {
		r, err := e.iv.Invoke(ctx, "crm.update", keys[i], in)
		if err != nil || !r.OK || r.Meta.Replayed {
			t.Fatal(r, err)
		}
		i++
	})
}
