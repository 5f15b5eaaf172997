package policytest

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane/internal/allocbudget"
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

// exampleCases are the example bundle's requests BenchExampleDecide
// decides: a read it allows and the injected refund it routes to finance.
var exampleCases = []string{
	"a support agent reads internal data",
	"the prompt-injected refund of $5,000 to another account waits for finance",
}

// BenchExampleDecide measures engine's decisions of the example bundle in
// dir (its tests.yaml holds the requests), alone and with the files of
// more (an organization's size of rules) added: the same sub-benchmarks
// for every engine, so their figures compare.
func BenchExampleDecide(b *testing.B, engine policy.Engine, dir string, more map[string]string) {
	for _, size := range []struct {
		name  string
		extra map[string]string
	}{
		{"example", nil},
		{"example+50", more},
	} {
		rules, reqs := exampleRules(b, engine, dir, size.extra)
		b.Run(size.name+"/read", func(b *testing.B) { BenchDecide(b, rules, &reqs[exampleCases[0]].Request) })
		b.Run(size.name+"/injected-refund", func(b *testing.B) { BenchDecide(b, rules, &reqs[exampleCases[1]].Request) })
	}
}

// BenchExampleCompile measures compiling the example bundle in dir, paid
// once per published version on each node.
func BenchExampleCompile(b *testing.B, engine policy.Engine, dir string) {
	files := exampleBundle(b, dir)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engine.Compile(files); err != nil {
			b.Fatal(err)
		}
	}
}

func exampleBundle(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	files, err := policy.ReadBundleDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// exampleRules compiles the example bundle in dir with the files of
// extra added, and answers it with the requests of exampleCases by name.
func exampleRules(tb testing.TB, engine policy.Engine, dir string, extra map[string]string) (policy.Rules, map[string]*policy.Case) {
	tb.Helper()
	files := exampleBundle(tb, dir)
	for k, v := range extra {
		files[k] = v
	}
	rules, err := engine.Compile(files)
	if err != nil {
		tb.Fatal(err)
	}
	cases, err := policy.ParseCases("tests.yaml", []byte(files["tests.yaml"]))
	if err != nil {
		tb.Fatal(err)
	}
	named := map[string]*policy.Case{}
	for i := range cases {
		named[cases[i].Name] = &cases[i]
	}
	for _, name := range exampleCases {
		if named[name] == nil {
			tb.Fatalf("%s/tests.yaml has no test %q", dir, name)
		}
	}
	return rules, named
}

// BudgetExampleDecide holds engine's decision of the example bundle's
// allowed read in dir, with the files of more beside it, to budget
// allocations per decision (package allocbudget): the same check for
// every engine, so their budgets compare. The decision is checked against
// the test's expectation before it is measured.
func BudgetExampleDecide(t *testing.T, engine policy.Engine, dir string, more map[string]string, budget int) {
	t.Helper()
	allocbudget.Skip(t)
	rules, cases := exampleRules(t, engine, dir, more)
	c := cases[exampleCases[0]]
	ctx := context.Background()
	d, err := rules.Evaluate(ctx, &c.Request)
	if err != nil {
		t.Fatal(err)
	}
	if msg := c.Check(d); msg != "" {
		t.Fatal(msg)
	}
	allocbudget.Check(t, "decision", budget, 20, 200, func() {
		if _, err := rules.Evaluate(ctx, &c.Request); err != nil {
			t.Fatal(err)
		}
	})
}
