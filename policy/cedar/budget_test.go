package cedar_test

import (
	"testing"

	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
)

// budgetDecide50 is the allocation budget of one decision with the example
// bundle and 50 more rules (issue 35), a little above the figure measured
// when it was set: measured 101 allocs per call (2026-12-06, 879b4e3d). An
// optimisation that lowers the figure lowers the budget in the same change.
const budgetDecide50 = 110

// TestAllocBudgetDecide50 is BenchmarkDecide's example+50/read: one
// decision of the example bundle's allowed read with fiftyRules beside it,
// the findings combined into the decision.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetDecide50(t *testing.T) {
	policytest.BudgetExampleDecide(t, cedar.Engine{}, "../../examples/policy/cedar", map[string]string{"fifty.cedar": fiftyRules()}, budgetDecide50)
}
