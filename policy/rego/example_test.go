package rego_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
	rules, err := rego.Engine{Budget: 10 * time.Second}.Compile(files)
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

// TestExampleBundleRefusesMisspeltArgument: the example declares the
// arguments it reads, so a rule reading one nobody declared never compiles.
func TestExampleBundleRefusesMisspeltArgument(t *testing.T) {
	t.Parallel()
	files, err := policy.ReadBundleDir("../../examples/policy/rego")
	if err != nil {
		t.Fatal(err)
	}
	files["typo.rego"] = "package toolplane.authz\n\nallow contains \"x\" if input.arguments.amount > 5\n"
	_, err = rego.Engine{}.Compile(files)
	var be *policy.BundleError
	if !errors.As(err, &be) || be.File != "typo.rego" || be.Line != 3 {
		t.Errorf("Compile = %v, want a BundleError at typo.rego:3", err)
	}
}
