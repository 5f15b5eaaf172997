package policytest_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

// TestEnginesAgree decides the whole table on both engines and compares
// the full decisions, rule, reason and route included.
func TestEnginesAgree(t *testing.T) {
	t.Parallel()
	cf, err := policytest.Bundle("cedar")
	if err != nil {
		t.Fatal(err)
	}
	rf, err := policytest.Bundle("rego")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cedar.Engine{}.Compile(cf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rego.Engine{}.Compile(rf)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := policytest.Same(context.Background(), c, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}
