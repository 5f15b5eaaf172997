package rego_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

// budgetDecide50 is the allocation budget of one decision with the example
// bundle and 50 more rules (issue 35), a little above the figure measured
// when it was set: measured 322 allocs per call (2026-12-06, 879b4e3d). An
// optimisation that lowers the figure lowers the budget in the same change.
const budgetDecide50 = 345

// TestAllocBudgetDecide50 is BenchmarkDecide's example+50/read: one
// decision of the example bundle's allowed read with fiftyRules beside it,
// the findings combined into the decision.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetDecide50(t *testing.T) {
	// A budget no decision reaches, as BenchmarkDecide's: a starved
	// decision on a loaded machine would fault, and the budget is what is
	// measured here, not the time.
	policytest.BudgetExampleDecide(t, rego.Engine{Budget: time.Minute}, "../../examples/policy/rego", map[string]string{"fifty.rego": fiftyRules()}, budgetDecide50)
}
