package rego_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/rego"
)

// TestExampleBundle runs the tests of the Rego twin of the shipped example
// bundle: its table (the Cedar bundle's) and its opa test-style tests.
func TestExampleBundle(t *testing.T) {
	t.Parallel()
	files, err := policy.ReadBundleDir("../../examples/policy/rego")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := rego.Engine{}.Compile(files)
	if err != nil {
		t.Fatal(err)
	}
	results, err := rules.Test(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < 13 {
		t.Fatalf("%d tests ran, want the table and the opa tests", len(results))
	}
	for _, r := range results {
		if !r.Pass {
			t.Errorf("%s: %s", r.Name, r.Message)
		}
	}
}
