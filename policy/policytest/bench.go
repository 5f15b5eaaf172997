package policytest

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane/policy"
)

// BenchDecide measures one decision of rules on req, and reports beside
// wall time the CPU time per decision (the process's, so collection
// included): on a shared machine wall time also counts the waits for a
// core. Both engines' benchmarks use it, so their figures compare.
func BenchDecide(b *testing.B, rules policy.Rules, req *policy.Request) {
	ctx := context.Background()
	b.ReportAllocs()
	cpu := CPUTime()
	for b.Loop() {
		if _, err := rules.Evaluate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	if used := CPUTime() - cpu; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
