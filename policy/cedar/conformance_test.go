package cedar_test

import (
	"testing"

	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	policytest.Run(t, cedar.Engine{})
}
