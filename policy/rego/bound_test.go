package rego_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

// hostileLimit is what a hostile decision or test may take here: far below
// the seconds they took unbounded, and generous enough for a loaded
// two-core machine running the race detector.
const hostileLimit = 1500 * time.Millisecond

// hostileAlloc is what a hostile decision or test may allocate here (the
// whole process's allocations while it runs, so it is measured with no
// other test running): the bound, and one built-in's output past it (a
// doubling's last step).
const hostileAlloc = 4 * rego.DefaultMemory

// measure runs f and answers how long it took and how much the process
// allocated meanwhile.
func measure(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return took, after.TotalAlloc - before.TotalAlloc
}

// The rules that build values without bound, each in a decision and in a
// bundle's own test: a range of two billion numbers (which grew the server
// by 1.1 GiB in 2.5 s) and text squared until it is gigabytes. Each ends
// within its time and memory bound as a fault or a failed test, never as
// a decision.
func TestRulesThatBuildWithoutBoundAreStopped(t *testing.T) {
	exprs := map[string]string{
		"a range of two billion": "count(numbers.range(1, 2000000000)) > 0",
		"a stepped range":        "count(numbers.range_step(1, 2000000000, 2)) > 0",
		"text squared": `s0 := concat("", ["1" | some _ in numbers.range(1, 300)]); ` +
			`s1 := replace(s0, "1", s0); s2 := replace(s1, "1", s1); s3 := replace(s2, "1", s2); count(s3) > 0`,
		"text doubled": `s0 := concat("", ["1" | some _ in numbers.range(1, 1000)]); ` + doubling(40) + `count(s40) > 0`,
	}
	for name, expr := range exprs {
		t.Run(name+"/decision", func(t *testing.T) {
			rules, err := rego.Engine{}.Compile(map[string]string{"a.rego": allowAll + "\ndeny contains \"big\" if {\n\t" + expr + "\n}\n"})
			if err != nil {
				t.Fatal(err)
			}
			var d policy.Decision
			took, alloc := measure(func() { d, err = rules.Evaluate(context.Background(), request()) })
			t.Logf("figures: %s %v %d MiB (%v)", t.Name(), took.Round(time.Millisecond), alloc>>20, err)
			if err == nil {
				t.Errorf("Evaluate = %+v; want a fault", d)
			}
			if took > hostileLimit || alloc > hostileAlloc {
				t.Errorf("the decision took %v and allocated %d MiB; want under %v and %d MiB", took, alloc>>20, hostileLimit, hostileAlloc>>20)
			}
		})
		t.Run(name+"/test", func(t *testing.T) {
			rules, err := rego.Engine{}.Compile(map[string]string{
				"a.rego":      allowAll,
				"a_test.rego": "package toolplane.authz_test\n\ntest_big if {\n\t" + expr + "\n}\n",
			})
			if err != nil {
				t.Fatal(err)
			}
			var res []policy.TestResult
			took, alloc := measure(func() { res, err = rules.Test(context.Background()) })
			t.Logf("figures: %s %v %d MiB (%+v)", t.Name(), took.Round(time.Millisecond), alloc>>20, res)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Pass {
				t.Errorf("Test = %+v; want the test failed", res)
			}
			if took > hostileLimit || alloc > hostileAlloc {
				t.Errorf("the test took %v and allocated %d MiB; want under %v and %d MiB", took, alloc>>20, hostileLimit, hostileAlloc>>20)
			}
		})
	}
}

// doubling writes n statements each doubling the text before it.
func doubling(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "s%d := concat(\"\", [s%d, s%d]); ", i, i-1, i-1)
	}
	return b.String()
}

// A request whose arguments hold more than the rules may read is denied by
// the bound, before it is converted, on a decision and in a bundle's test.
func TestAnArgumentArrayPastTheBoundIsDenied(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"a.rego": allowAll,
		"tests.json": fmt.Sprintf(`{"tests": [{"name": "hostile", "expect": "deny", "rule": %q,
			"request": {"tool": {"name": "stats.sum"}, "arguments": {"values": %s}}}]}`,
			policy.RuleInputBound, policytest.CollidingNumbersJSON(20000)),
	}
	rules, err := rego.Engine{}.Compile(files)
	if err != nil {
		t.Fatal(err)
	}
	req := request()
	req.Arguments = map[string]any{"values": policytest.CollidingNumbers(20000)}
	d, err := rules.Evaluate(context.Background(), req)
	if err != nil || d.Effect != policy.Deny || d.Rule != policy.RuleInputBound || !strings.Contains(d.Reason, "arguments.values") {
		t.Errorf("Evaluate = %+v, %v; want a denial by %s naming arguments.values", d, err, policy.RuleInputBound)
	}
	res, err := rules.Test(context.Background())
	if err != nil || len(res) != 1 || !res[0].Pass {
		t.Errorf("Test = %+v, %v; want the hostile case denied by the bound", res, err)
	}
	req.Arguments = map[string]any{"values": policytest.CollidingNumbers(400)}
	if d, err := rules.Evaluate(context.Background(), req); err != nil || d.Effect != policy.Allow {
		t.Errorf("Evaluate within the bound = %+v, %v; want allow", d, err)
	}
}

// BenchmarkHostileDecide is the cost of deciding the colliding array of
// 2×20,000 numbers: refused by the input bound, after counting it.
func BenchmarkHostileDecide(b *testing.B) {
	rules, err := rego.Engine{}.Compile(map[string]string{"a.rego": allowAll})
	if err != nil {
		b.Fatal(err)
	}
	req := request()
	req.Arguments = map[string]any{"values": policytest.CollidingNumbers(20000)}
	policytest.BenchDecide(b, rules, req)
}

// A large bundle's own tests are not stopped by the memory bound: what
// the tester allocates compiling it is no test's. Not parallel: the
// bound counts the process's allocations.
func TestALargeBundlesTestsPass(t *testing.T) {
	const nTests = 3
	var rules, tests strings.Builder
	rules.WriteString("package toolplane.authz\n\n")
	tests.WriteString("package toolplane.authz_test\n\nimport data.toolplane.authz\n\n")
	for i := range 9000 {
		fmt.Fprintf(&rules, "allow contains \"r%d\" if input.tool.name == \"svc-%d.read\"\n", i, i)
	}
	for i := range nTests {
		fmt.Fprintf(&tests, "test_r%d if \"r%d\" in authz.allow with input as {\"tool\": {\"name\": \"svc-%d.read\"}}\n", i, i, i)
	}
	// Time is not what this test is about: a loaded machine may take
	// longer than the default budget to evaluate 9,000 rules.
	compiled, err := rego.Engine{Budget: 10 * time.Second}.Compile(map[string]string{"a.rego": rules.String(), "a_test.rego": tests.String()})
	if err != nil {
		t.Fatal(err)
	}
	var res []policy.TestResult
	took, alloc := measure(func() { res, err = compiled.Test(context.Background()) })
	t.Logf("the run took %v and allocated %d MiB", took, alloc>>20)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != nTests {
		t.Errorf("ran %d tests; want %d", len(res), nTests)
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s: %s", r.Name, r.Message)
		}
	}
}
