package cedar_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
)

// TestExampleBundle runs the tests of the shipped example bundle: among
// them the prompt-injected refund routed to finance.
func TestExampleBundle(t *testing.T) {
	t.Parallel()
	files, err := policy.ReadBundleDir("../../examples/policy/cedar")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := cedar.Engine{}.Compile(files)
	if err != nil {
		t.Fatal(err)
	}
	results, err := rules.Test(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < 10 {
		t.Fatalf("%d tests ran, want the bundle's whole table", len(results))
	}
	for _, r := range results {
		if !r.Pass {
			t.Errorf("%s: %s", r.Name, r.Message)
		}
	}
}
