package rego

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolplane/toolplane/policy/policytest"
)

// TestInputMapsEveryField: a field added to policy.Request that the input
// document does not carry fails here.
func TestInputMapsEveryField(t *testing.T) {
	t.Parallel()
	policytest.MapsEveryField(t, inputValue, func(a, b ast.Value) bool { return ast.Compare(a, b) == 0 })
}
