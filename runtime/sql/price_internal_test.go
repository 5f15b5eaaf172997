package sqlruntime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// TestPricedStatementsReportTheirCost: on every database, a fixed price
// is reported for each call that succeeded, a column price is the sum of
// the column over the rows answered (no row costs nothing), and a row
// whose column states no number is a meter fault; a failed statement
// reports nothing.
func TestPricedStatementsReportTheirCost(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f := open(t, be, Config{})
			f.insert("a", "b", "c")
			for _, tc := range []struct {
				name   string
				effect toolplane.Effect
				stmt   string
				price  toolplane.Price
				cents  int64
				fault  bool
				failed bool
			}{
				{"fixed write", toolplane.EffectWrite, `UPDATE items SET qty = qty + 1 WHERE name = 'a'`, toolplane.Price{Cents: 9}, 9, false, false},
				{"fixed read", toolplane.EffectRead, `SELECT name FROM items`, toolplane.Price{Cents: 2}, 2, false, false},
				{"column summed", toolplane.EffectRead, `SELECT name, qty * 3 AS cost_cents FROM items WHERE name IN ('b', 'c')`, toolplane.Price{Field: "cost_cents", MaxCents: 100}, 6, false, false},
				{"no rows", toolplane.EffectRead, `SELECT name, qty AS cost_cents FROM items WHERE name = 'none'`, toolplane.Price{Field: "cost_cents", MaxCents: 100}, 0, false, false},
				{"column not a number", toolplane.EffectRead, `SELECT name AS cost_cents FROM items WHERE name = 'b'`, toolplane.Price{Field: "cost_cents", MaxCents: 100}, 0, true, false},
				{"column past the bound", toolplane.EffectRead, `SELECT qty * 1000 AS cost_cents FROM items WHERE name = 'b'`, toolplane.Price{Field: "cost_cents", MaxCents: 100}, 0, true, false},
				{"failed statement", toolplane.EffectWrite, `UPDATE items SET qty = -1 WHERE name = 'c'`, toolplane.Price{Cents: 9}, 0, false, true},
			} {
				d := tool(tc.effect, tc.stmt, 0)
				d.Metered, d.Price = true, &tc.price
				if ps := Check(d); len(ps) != 0 {
					t.Fatalf("%s: %v", tc.name, ps)
				}
				b, err := f.rt.Bind(d)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ctx, read := handler.WithUsage(ctx)
				_, err = b.Invoke(ctx, handler.Call{Tool: d.Name, Version: d.Version, Released: f.rel}, map[string]any{})
				cancel()
				m := read()
				switch {
				case tc.failed:
					if err == nil || m.Reported || m.Fault != nil {
						t.Errorf("%s: err %v, metering %+v; want a failure that reports nothing", tc.name, err, m)
					}
				case err != nil:
					t.Errorf("%s: %v", tc.name, err)
				case tc.fault:
					if !errors.Is(m.Fault, handler.ErrUnpriced) {
						t.Errorf("%s: metering %+v, want a meter fault", tc.name, m)
					}
				case !m.Reported || m.Cents != tc.cents || m.Units != 1 || m.Fault != nil:
					t.Errorf("%s: metering %+v, want %d cents", tc.name, m, tc.cents)
				}
			}
		})
	}
}
