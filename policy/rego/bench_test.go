package rego_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

// fiftyRules are 50 grants of one role to one tool each, so a bundle
// holds about as many rules as an organization's real one.
func fiftyRules() string {
	var sb strings.Builder
	sb.WriteString("package toolplane.authz\n\n")
	for i := range 50 {
		fmt.Fprintf(&sb, "allow contains \"grant-%d\" if {\n\t\"role-%d\" in input.principal.roles\n\tinput.tool.name == \"svc-%d.read\"\n\tinput.tool.read_only\n}\n\n", i, i, i)
	}
	return sb.String()
}

// BenchmarkDecide is the cost of one decision on the example bundle (8
// rules), and on it with 50 more grants.
func BenchmarkDecide(b *testing.B) {
	// A budget no decision reaches: the benchmark measures cost, and on a
	// machine shared with other work a starved decision would fault.
	policytest.BenchExampleDecide(b, rego.Engine{Budget: time.Minute}, "../../examples/policy/rego", map[string]string{"fifty.rego": fiftyRules()})
}

// BenchmarkCompile is the cost of compiling the example bundle, paid once
// per published version on each node.
func BenchmarkCompile(b *testing.B) {
	policytest.BenchExampleCompile(b, rego.Engine{}, "../../examples/policy/rego")
}
