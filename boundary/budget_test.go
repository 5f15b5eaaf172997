package boundary_test

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/internal/allocbudget"
)

// budgetResult32KiB is the allocation budget of the result boundary on a
// 32 KiB answer (issue 35), a little above the figure measured when it was
// set: measured 14 allocs per call (2026-12-06, 879b4e3d). An optimisation
// that lowers the figure lowers the budget in the same change.
const budgetResult32KiB = 15

// TestAllocBudgetResult32KiB is what the boundary does to a handler's
// answer of 32 KiB (rows of a list tool, as a handler's JSON decodes to):
// Apply (normalise, redact, bound, name what was dropped) and Render, the
// bytes of the result a door sends.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetResult32KiB(t *testing.T) {
	allocbudget.Skip(t)
	// The most rows that fit the platform's limit, 32 KiB: the largest
	// answer the boundary passes whole, so every row is walked, redacted
	// and encoded, and none is cut.
	all := rows(400)
	n := 1
	for boundary.Size(all[:n+1]) <= boundary.PlatformLimit {
		n++
	}
	in := all[:n]
	spec := boundary.Spec{ItemKind: "crm.person"}
	var size int
	apply := func() {
		data, meta := boundary.Apply(in, spec)
		if meta.Truncated || meta.Count == nil || *meta.Count != n {
			t.Fatalf("%d rows of %d bytes: truncated %v, rows kept %v", n, boundary.Size(in), meta.Truncated, meta.Count)
		}
		size = len(boundary.Render(toolplane.Result{OK: true, Data: data, Meta: meta}))
	}
	apply()
	if size < 31<<10 {
		t.Fatalf("the result of %d rows is %d bytes, want about 32 KiB", n, size)
	}
	t.Logf("%d rows, %d bytes rendered", n, size)
	allocbudget.Check(t, "call", budgetResult32KiB, 20, 200, apply)
}
