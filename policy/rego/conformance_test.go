package rego_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	// A budget no decision of the table reaches even under the race
	// detector on a busy machine: the table checks decisions; rego_test
	// checks the budget.
	policytest.Run(t, rego.Engine{Budget: 10 * time.Second})
}
