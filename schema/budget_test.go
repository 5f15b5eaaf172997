package schema

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolplane/toolplane/internal/allocbudget"
)

// budgetValidate10Fields is the allocation budget of validating a 10-field
// argument (issue 35), a little above the figure measured when it was
// set: measured 11 allocs per call (2026-12-06, 879b4e3d). An optimisation
// that lowers the figure lowers the budget in the same change.
const budgetValidate10Fields = 12

// TestAllocBudgetValidate10Fields is BenchmarkValidate10Fields's check of
// a valid argument of ten fields against its compiled schema.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetValidate10Fields(t *testing.T) {
	allocbudget.Skip(t)
	s, err := Compile([]byte(tenFieldSchema))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(tenFieldArgs))
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		if _, _, vs := s.Check(v); len(vs) != 0 {
			t.Fatal(vs)
		}
	}
	allocbudget.Check(t, "call", budgetValidate10Fields, 20, 1000, check)
}
