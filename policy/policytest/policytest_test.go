package policytest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
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
	r, err := rego.Engine{Budget: time.Minute}.Compile(rf)
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

// TestConcurrentDecisions decides the table from several goroutines at once
// on one compiled bundle of each engine (run it with -race): compiled rules
// are shared by every call on a node.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	cases, err := policytest.Cases()
	if err != nil {
		t.Fatal(err)
	}
	engines := []policy.Engine{cedar.Engine{}, rego.Engine{Budget: time.Minute}}
	for _, e := range engines {
		t.Run(e.Language(), func(t *testing.T) {
			t.Parallel()
			files, err := policytest.Bundle(e.Language())
			if err != nil {
				t.Fatal(err)
			}
			rules, err := e.Compile(files)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for i := range cases {
						d, err := rules.Evaluate(context.Background(), &cases[i].Request)
						if err != nil {
							t.Errorf("%s: %v", cases[i].Name, err)
							continue
						}
						if msg := cases[i].Check(d); msg != "" {
							t.Errorf("%s: %s", cases[i].Name, msg)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
