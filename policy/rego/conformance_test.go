package rego_test

import (
	"testing"

	"github.com/toolplane/toolplane/policy/rego"
	"github.com/toolplane/toolplane/policy/policytest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	policytest.Run(t, rego.Engine{})
}
