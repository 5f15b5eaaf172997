package storetest

import "testing"

// check is one named check with what it needs of the backend bound.
type check struct {
	name string
	run  func(t *testing.T)
}

// runChecks runs checks as parallel subtests of a parallel subtest named
// group, so one check runs alone with -run 'Test.../Group/Check'.
func runChecks(t *testing.T, group string, checks []check) {
	t.Helper()
	t.Run(group, func(t *testing.T) {
		t.Parallel()
		for _, c := range checks {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t)
			})
		}
	})
}
