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
			// The handler answers only once the call was answered
			// uncertain, so it is the late answer on a loaded machine too,
			// where the invoker may not look before both its deadline and
			// a handler that merely slept past it are ready. The
			// settlement window need only outlast that hand-over.
			stopped := make(chan struct{})
			e := newEnv(t, store, tool{def: d, fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
				select {
				case <-stopped:
				case <-time.After(time.Minute): // the invoker waited for it: a bug the test reports
				}
				tc.price(ctx)
				return map[string]any{"vendor": "answer"}, nil
			}, opts: []handler.Option{handler.WithSettlement(time.Minute)}})
			in := inv("vendor.order")
			r, err := e.iv.Invoke(context.Background(), "vendor.order", args("to", "o"), in)
			close(stopped)
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
