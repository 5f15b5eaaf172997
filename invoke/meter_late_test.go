package invoke_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// A metered write stopped at its timeout and settled by its handler later
// is counted like one that answered in time: its usage row is written
// with the settlement, and the next identical call, handed the settled
// answer, is one the budget counted. One whose handler could not price it
// stays uncertain: its answer is never handed out uncounted.
func TestLateSettlementOfAMeteredWriteIsCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		price func(ctx context.Context)
		want  toolplane.Code // the identical call's answer after the settlement ("" ok)
		cost  int64
	}{
		{"priced", func(ctx context.Context) { _ = handler.ReportUsage(ctx, 40, 1) }, "", 40},
		{"not priceable", func(ctx context.Context) { _ = handler.ReportUsageFault(ctx, errors.New("no price in the answer")) }, toolplane.CodeUncertain, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := def("vendor.order", toolplane.EffectWrite, func(d *toolplane.Definition) {
				d.Metered = true
				d.Timeout = toolplane.Duration(20 * time.Millisecond)
			})
			store := newStore(t)
			e := newEnv(t, store, tool{def: d, fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
				time.Sleep(80 * time.Millisecond) // answers after it was stopped
				tc.price(ctx)
				return map[string]any{"vendor": "answer"}, nil
			}, opts: []handler.Option{handler.WithSettlement(2 * time.Second)}})
			in := inv("vendor.order")
			r, err := e.iv.Invoke(context.Background(), "vendor.order", args("to", "o"), in)
			code(t, r, err, toolplane.CodeUncertain)
			e.iv.Wait()
			r, err = e.iv.Invoke(context.Background(), "vendor.order", args("to", "o"), in)
			if tc.want == "" {
				if err != nil || !r.OK {
					t.Fatalf("identical call after the settlement = %+v, %v; want the settled answer", r, err)
				}
			} else {
				code(t, r, err, tc.want)
			}
			cost, err := store.RunTreeCost(context.Background(), in.OrganizationID, in.RunID)
			if err != nil || cost != tc.cost {
				t.Fatalf("run cost = %d, %v; want %d", cost, err, tc.cost)
			}
		})
	}
}
