package cedar_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
)

// benchCases are the example bundle's requests the benchmarks decide: a
// read it allows and the injected refund it routes to finance.
var benchCases = []string{
	"a support agent reads internal data",
	"the prompt-injected refund of $5,000 to another account waits for finance",
}

func exampleRules(b *testing.B, extra map[string]string) (policy.Rules, map[string]*policy.Request) {
	b.Helper()
	files, err := policy.ReadBundleDir("../../examples/policy/cedar")
	if err != nil {
		b.Fatal(err)
	}
	for k, v := range extra {
		files[k] = v
	}
	rules, err := cedar.Engine{}.Compile(files)
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
	return rules, reqs
}

// fiftyRules are 50 grants of one role to one tool each, so a bundle
// holds about as many rules as an organization's real one.
func fiftyRules() string {
	var sb strings.Builder
	for i := range 50 {
		fmt.Fprintf(&sb, "@id(\"grant-%d\")\npermit (principal in Role::\"role-%d\", action == Action::\"call\", resource)\nwhen { resource.name == \"svc-%d.read\" && resource.read_only };\n\n", i, i, i)
	}
	return sb.String()
}

// BenchmarkDecide is the cost of one decision on the example bundle (8
// rules), and on it with 50 more grants.
func BenchmarkDecide(b *testing.B) {
	for _, size := range []struct {
		name  string
		extra map[string]string
	}{
		{"example", nil},
		{"example+50", map[string]string{"fifty.cedar": fiftyRules()}},
	} {
		rules, reqs := exampleRules(b, size.extra)
		b.Run(size.name+"/read", func(b *testing.B) { policytest.BenchDecide(b, rules, reqs[benchCases[0]]) })
		b.Run(size.name+"/injected-refund", func(b *testing.B) { policytest.BenchDecide(b, rules, reqs[benchCases[1]]) })
	}
}

// BenchmarkCompile is the cost of compiling the example bundle, paid once
// per published version on each node.
func BenchmarkCompile(b *testing.B) {
	files, err := policy.ReadBundleDir("../../examples/policy/cedar")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (cedar.Engine{}).Compile(files); err != nil {
			b.Fatal(err)
		}
	}
}
