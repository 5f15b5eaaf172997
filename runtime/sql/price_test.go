package sqlruntime_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestFixedPricedSQLWriteWritesItsUsageRow: a sql write priced fixed,
// run by the invoker on PostgreSQL, writes one usage row of its price
// and its audit event carries the cost; the identical call, answered
// from the journal, charges nothing more.
func TestFixedPricedSQLWriteWritesItsUsageRow(t *testing.T) {
	t.Parallel()
	d := sqlDef(toolplane.EffectWrite, `UPDATE items SET qty = qty + 1 WHERE name = :name`, nil)
	d.Metered, d.Price = true, &toolplane.Price{Cents: 25}
	e := newPGEnv(t, d)
	store := e.store.(toolplane.Store)
	ctx := context.Background()
	for range 2 {
		r, err := e.iv.Invoke(ctx, d.Name, map[string]any{"name": "widget"}, invocation())
		if err != nil || !r.OK {
			t.Fatalf("call: %+v, %v", r.Error, err)
		}
	}
	if got, err := store.RunTreeCost(ctx, "org-1", "run-1"); err != nil || got != 25 {
		t.Fatalf("spent %d (%v), want 25 once", got, err)
	}
	var qty int
	if err := e.admin.QueryRow(`SELECT qty FROM items WHERE name = 'widget'`).Scan(&qty); err != nil || qty != 2 {
		t.Fatalf("qty %d (%v), want one change", qty, err)
	}
	evs, _, err := store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 10)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].CostCents != 25 {
		t.Fatalf("audit %+v (%v), want the first call's cost 25", evs, err)
	}
}
