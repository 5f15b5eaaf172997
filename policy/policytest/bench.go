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
		files := exampleBundle(b, dir)
		for k, v := range size.extra {
			files[k] = v
		}
		rules, err := engine.Compile(files)
		if err != nil {
			b.Fatal(err)
		}
		cases, err := policy.ParseCases("tests.yaml", []byte(files["tests.yaml"]))
		if err != nil {
			b.Fatal(err)
		}
		reqs := map[string]*policy.Request{}
		for i := range cases {
			reqs[cases[i].Name] = &cases[i].Request
		}
		for _, name := range exampleCases {
			if reqs[name] == nil {
				b.Fatalf("%s/tests.yaml has no test %q", dir, name)
			}
		}
		b.Run(size.name+"/read", func(b *testing.B) { BenchDecide(b, rules, reqs[exampleCases[0]]) })
		b.Run(size.name+"/injected-refund", func(b *testing.B) { BenchDecide(b, rules, reqs[exampleCases[1]]) })
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

func exampleBundle(b *testing.B, dir string) map[string]string {
	b.Helper()
	files, err := policy.ReadBundleDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	return files
}
