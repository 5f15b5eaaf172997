package cedar_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
)

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
	policytest.BenchExampleDecide(b, cedar.Engine{}, "../../examples/policy/cedar", map[string]string{"fifty.cedar": fiftyRules()})
}

// BenchmarkCompile is the cost of compiling the example bundle, paid once
// per published version on each node.
func BenchmarkCompile(b *testing.B) {
	policytest.BenchExampleCompile(b, cedar.Engine{}, "../../examples/policy/cedar")
}
