package policy_test

import (
	"errors"
	"os"
	"testing"

	"github.com/toolplane/toolplane/policy"
)

// FuzzParseCases feeds arbitrary tables to ParseCases: a table it cannot
// read is a *policy.BundleError, never a panic.
func FuzzParseCases(f *testing.F) {
	b, err := os.ReadFile("../examples/policy/cedar/tests.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("tests.yaml", string(b))
	f.Add("tests.json", `{"tests": [{"name": "a", "request": {"principal": {"agent": "x"}}, "expect": "allow"}]}`)
	f.Add("tests.yaml", "tests:\n  - &a {name: x, expect: deny}\n  - *a\n")
	f.Add("tests.yaml", "tests: [{name: x, expect: deny, approval: {approvers: -1}}, {<<: 3}]")
	f.Fuzz(func(t *testing.T, name, table string) {
		_, err := policy.ParseCases(name, []byte(table))
		var be *policy.BundleError
		if err != nil && !errors.As(err, &be) {
			t.Fatalf("ParseCases = %T %v, want a *policy.BundleError", err, err)
		}
	})
}
