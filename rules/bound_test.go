package rules_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
	"github.com/toolplane/toolplane/rules"
)

// hostileLimit is what a hostile call's decision, or a hostile bundle's
// test run, may take here: far below the seconds each took unbounded,
// and generous for a loaded two-core machine under the race detector.
const hostileLimit = 1500 * time.Millisecond

// The hostile request of issue 27 through the service, on a real Cedar
// bundle whose rules read the array: a call whose arguments hold 20,000
// integers and 20,000 colliding decimals is denied by the input bound in
// milliseconds (it held a core for seconds and answered internal_error),
// and the same array in a case of the bundle's tests, run by an
// agent_operator, is decided as quickly.
func TestAHostileArgumentArrayIsRefusedQuickly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants},
		Engines: []policy.Engine{cedar.Engine{}, rego.Engine{}}, Now: f.clock.Now})
	files := map[string]string{
		"a.cedar": `@id("all") permit (principal, action, resource);
@id("no-zero") forbid (principal, action, resource) when { context.arguments has values && context.arguments.values.contains(0) };`,
		"schema.cedarschema": `type Arguments = { values?: Set<Long> };`,
		"tests.yaml": `tests:
  - name: a sum is allowed
    expect: allow
    request: {tool: {name: crm.lookup}, arguments: {values: [1, 2, 3]}}
`,
	}
	f.publish(t, files, rules.PublishOptions{Note: "reads values"})

	in := input("agent-1", "crm.lookup", map[string]any{"values": policytest.CollidingNumbers(20000)})
	start := time.Now()
	d, err := f.svc.Decide(t.Context(), in)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Decide = %v; want a denial", err)
	}
	if d.Effect != policy.Deny || d.Rule != policy.RuleInputBound || !strings.Contains(d.Reason, "arguments.values") || d.Bundle != 1 {
		t.Errorf("Decide = %s by %q in bundle %d (%s); want a denial by %s naming arguments.values", d.Effect, d.Rule, d.Bundle, d.Reason, policy.RuleInputBound)
	}
	if took > hostileLimit {
		t.Errorf("the decision took %v; want under %v", took, hostileLimit)
	}

	// The bundle's tests, with the array in a case: compared with as many
	// plain integers, not a clock, so that a loaded machine slows both
	// alike.
	run := func(values string) time.Duration {
		table := map[string]string{"a.cedar": files["a.cedar"], "schema.cedarschema": files["schema.cedarschema"],
			"tests.json": fmt.Sprintf(`{"tests": [{"name": "hostile", "expect": "allow",
			"request": {"tool": {"name": "crm.lookup"}, "arguments": {"values": %s}}}]}`, values)}
		start := time.Now()
		res, err := f.svc.Test(t.Context(), table, operator)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].Pass || !strings.Contains(res[0].Message, policy.RuleInputBound) {
			t.Errorf("Test = %+v; want the case failed, denied by %s", res, policy.RuleInputBound)
		}
		return took
	}
	plain := run(policytest.PlainNumbersJSON(20000))
	hostile := run(policytest.CollidingNumbersJSON(20000))
	if hostile > 3*plain+200*time.Millisecond {
		t.Errorf("the bundle's test took %v for the colliding array, %v for the plain one; want them alike", hostile, plain)
	}
}

// A Rego bundle test that builds a range of two billion numbers (it ran
// 2.5 s and grew the server by 1.1 GiB) is stopped by its memory bound,
// through the endpoint an agent_operator may call, with the service's
// default bounds. Not parallel: it measures the process's allocations.
func TestAHostileRegoBundleTestIsStopped(t *testing.T) {
	f := newFixture(t)
	f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants},
		Engines: []policy.Engine{cedar.Engine{}, rego.Engine{}}, Now: f.clock.Now})
	files := map[string]string{
		"a.rego":      "package toolplane.authz\n\nallow := true\n",
		"a_test.rego": "package toolplane.authz_test\n\ntest_range if count(numbers.range(1, 2000000000)) > 0\n",
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	res, err := f.svc.Test(t.Context(), files, operator)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if err != nil || len(res) != 1 || res[0].Pass {
		t.Errorf("Test = %+v, %v; want the test failed", res, err)
	}
	if took > hostileLimit || alloc > 4*rego.DefaultMemory {
		t.Errorf("the run took %v and allocated %d MiB; want under %v and %d MiB", took, alloc>>20, hostileLimit, 4*rego.DefaultMemory>>20)
	}
}

// A bundle of many tests that each spend their time is stopped by the
// test budget, and refused as invalid, naming it.
func TestBundleTestsSpendAtMostTheTestBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc = rules.New(rules.Config{Store: f.store, Grants: authz.Policy{Service: f.grants},
		Engines: []policy.Engine{cedar.Engine{}, rego.Engine{}}, Now: f.clock.Now, TestBudget: time.Second})
	var many strings.Builder
	many.WriteString("package toolplane.authz_test\n\n")
	for i := range 50 {
		fmt.Fprintf(&many, "test_spin_%d if { every x in numbers.range(1, 400) { every y in numbers.range(1, 400) { x + y > 0 } } }\n", i)
	}
	files := map[string]string{"a.rego": "package toolplane.authz\n\nallow := true\n", "a_test.rego": many.String()}
	start := time.Now()
	res, err := f.svc.Test(t.Context(), files, operator)
	took := time.Since(start)
	if !errors.Is(err, toolplane.ErrInvalid) || !strings.Contains(err.Error(), "did not finish within 1s") {
		t.Errorf("Test = %+v, %v; want invalid, naming the budget", res, err)
	}
	if took > time.Second+hostileLimit {
		t.Errorf("the run took %v; want it stopped near its 1s budget", took)
	}
}
