package rego_test

import (
	"testing"

	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	policytest.Run(t, rego.Engine{})
}
