package cedar_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
)

// hostileLimit is what one decision on a hostile request may take here:
// far below the seconds the colliding array cost, and generous enough for
// a loaded two-core machine running the race detector.
const hostileLimit = 750 * time.Millisecond

// valuesBundle forbids a call whose values argument holds 0, so rules can
// read the array: it is converted, and bounded.
var valuesBundle = map[string]string{
	"a.cedar": permitAll + "\n" + `@id("no-zero") @reason("zero is not allowed")
forbid (principal, action, resource) when { context.arguments has values && context.arguments.values.contains(0) };`,
	"schema.cedarschema": `type Arguments = { values?: Set<Long>, note?: String };`,
}

func hostileRequest(values []any) *policy.Request {
	return &policy.Request{
		Principal: policy.Principal{Agent: "a", Roles: []string{}, Attributes: map[string]any{}},
		Tool:      policy.Tool{Name: "stats.sum", Tags: []string{}, Sensitive: []string{}},
		Arguments: map[string]any{"values": values, "note": "sum"},
		Facts:     map[string]any{},
	}
}

// An argument array of 20,000 integers and 20,000 colliding decimals is
// decided in milliseconds: converted not at all when no rule can read it
// (the bundle's schema does not declare it), and refused by a denial
// naming the bound, before any conversion, when a rule can. A decision
// past the bound never allows.
func TestACollidingArrayIsDecidedQuickly(t *testing.T) {
	hostile := policytest.CollidingNumbers(20000)
	tests := []struct {
		name   string
		files  map[string]string
		values []any
		effect policy.Effect
		rule   string
	}{
		{name: "no rule reads it", files: map[string]string{"a.cedar": permitAll}, values: hostile, effect: policy.Allow, rule: "all"},
		{name: "a rule reads it", files: valuesBundle, values: hostile, effect: policy.Deny, rule: policy.RuleInputBound},
		{name: "a rule reads it, within the bound", files: valuesBundle, values: policytest.CollidingNumbers(policy.MaxInputArray / 2), effect: policy.Allow, rule: "all"},
		{name: "a rule reads it and decides", files: valuesBundle, values: []any{1, 0}, effect: policy.Deny, rule: "no-zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := cedar.Engine{}.Compile(tt.files)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d, err := rules.Evaluate(context.Background(), hostileRequest(tt.values))
			took := time.Since(start)
			if err != nil {
				t.Fatalf("Evaluate = %v; want a decision", err)
			}
			if d.Effect != tt.effect || d.Rule != tt.rule {
				t.Errorf("Evaluate = %s by %q (%s); want %s by %q", d.Effect, d.Rule, d.Reason, tt.effect, tt.rule)
			}
			if took > hostileLimit {
				t.Errorf("the decision took %v; want under %v", took, hostileLimit)
			}
		})
	}
}

// The same array in a case of the bundle's own test table is decided about
// as fast as as many plain integers (an agent_operator may run a bundle's
// tests): compared with the plain array, not a clock, so that a loaded
// machine slows both alike.
func TestACollidingArrayInABundleTestIsDecidedQuickly(t *testing.T) {
	run := func(values string) time.Duration {
		files := map[string]string{
			"a.cedar":            valuesBundle["a.cedar"],
			"schema.cedarschema": valuesBundle["schema.cedarschema"],
			"tests.json": fmt.Sprintf(`{"tests": [{"name": "hostile", "expect": "deny", "rule": %q,
			"request": {"tool": {"name": "stats.sum"}, "arguments": {"values": %s}}}]}`, policy.RuleInputBound, values),
		}
		start := time.Now()
		rules, err := cedar.Engine{}.Compile(files)
		if err != nil {
			t.Fatal(err)
		}
		res, err := rules.Test(context.Background())
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || !res[0].Pass {
			t.Errorf("Test = %+v; want the case denied by the bound", res)
		}
		return took
	}
	plain := run(policytest.PlainNumbersJSON(20000))
	hostile := run(policytest.CollidingNumbersJSON(20000))
	if hostile > 3*plain+200*time.Millisecond {
		t.Errorf("the bundle's test took %v for the colliding array, %v for the plain one; want them alike", hostile, plain)
	}
}

// A context that ends while the rules are decided stops them: a bundle's
// policies are decided in slices, the context read between them.
func TestACancelledEvaluationStops(t *testing.T) {
	t.Parallel()
	rules, err := cedar.Engine{}.Compile(valuesBundle)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if d, err := rules.Evaluate(ctx, hostileRequest([]any{1})); !errors.Is(err, policy.ErrBudget) {
		t.Errorf("Evaluate past its deadline = %+v, %v; want ErrBudget", d, err)
	}
}

// BenchmarkHostileDecide is the cost of deciding the colliding array of
// 2×20,000 numbers, read by a rule (refused by the bound) and read by none.
func BenchmarkHostileDecide(b *testing.B) {
	hostile := hostileRequest(policytest.CollidingNumbers(20000))
	for name, files := range map[string]map[string]string{"read": valuesBundle, "unread": {"a.cedar": permitAll}} {
		b.Run(name, func(b *testing.B) {
			rules, err := cedar.Engine{}.Compile(files)
			if err != nil {
				b.Fatal(err)
			}
			policytest.BenchDecide(b, rules, hostile)
		})
	}
}

// A bundle of more policies than one slice decides as one set would: a
// forbid in a later slice than the permit still denies, and an approval
// rule in a later slice still asks.
func TestPoliciesDecidedInSlicesDecideAsOne(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	for i := range 150 {
		fmt.Fprintf(&sb, "@id(\"p%03d\") permit (principal, action, resource) when { resource.name == \"t.%d\" };\n", i, i)
	}
	sb.WriteString(`@id("z-forbid") forbid (principal, action, resource) when { resource.name == "t.3" };` + "\n")
	for i := range 100 {
		fmt.Fprintf(&sb, "@id(\"a%03d\") @approval(\"g%d\") forbid (principal, action, resource) when { resource.name == \"t.%d\" };\n", i, i, 100+i)
	}
	rules, err := cedar.Engine{}.Compile(map[string]string{"a.cedar": sb.String()})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]struct {
		effect policy.Effect
		rule   string
	}{
		"t.2":   {policy.Allow, "p002"},
		"t.3":   {policy.Deny, "z-forbid"},
		"t.149": {policy.RequireApproval, "a049"},
		"t.160": {policy.Deny, ""},
	} {
		req := hostileRequest(nil)
		req.Tool.Name = tool
		d, err := rules.Evaluate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Effect != want.effect || d.Rule != want.rule {
			t.Errorf("%s: %s by %q (%s); want %s by %q", tool, d.Effect, d.Rule, d.Reason, want.effect, want.rule)
		}
	}
}

// Converting only what the schema declares keeps a value of the wrong
// type a fault, as it was: a forbid that cannot read its argument never
// lets the call through.
func TestAnArgumentOfTheWrongTypeIsStillAFault(t *testing.T) {
	t.Parallel()
	rules, err := cedar.Engine{}.Compile(valuesBundle)
	if err != nil {
		t.Fatal(err)
	}
	req := hostileRequest(nil)
	req.Arguments["values"] = "0"
	if d, err := rules.Evaluate(context.Background(), req); err == nil {
		t.Errorf("Evaluate with a text where a set is declared = %+v; want a fault", d)
	}
}

// worstWithinBounds is the costliest request the bounds let a rule read:
// as many declared arrays of MaxInputArray colliding numbers as
// MaxInputValues holds, and a rule on each comparing it with the next,
// whose set operations probe the colliding runs.
func worstWithinBounds() (map[string]string, *policy.Request) {
	var schema, rules strings.Builder
	args := map[string]any{}
	schema.WriteString("type Arguments = {")
	rules.WriteString(permitAll + "\n")
	n := policy.MaxInputValues / (policy.MaxInputArray + 1)
	for i := range n {
		fmt.Fprintf(&schema, " v%d?: Set<Long>,", i)
		args[fmt.Sprint("v", i)] = policytest.CollidingNumbers(policy.MaxInputArray / 2)
		fmt.Fprintf(&rules, "@id(\"f%d\") forbid (principal, action, resource) when { context.arguments has v%d && context.arguments has v%d && "+
			"context.arguments.v%d.containsAll(context.arguments.v%d) && !context.arguments.v%d.contains(0) && context.arguments.v%d == context.arguments.v%d };\n",
			i, i, (i+1)%n, i, (i+1)%n, i, i, (i+1)%n)
	}
	schema.WriteString(" };")
	req := hostileRequest(nil)
	req.Arguments = args
	return map[string]string{"a.cedar": rules.String(), "schema.cedarschema": schema.String()}, req
}

// The costliest request within the bounds is decided in milliseconds:
// cedar-go cannot stop an evaluation, so the bounds are what keep it short.
func TestTheWorstRequestWithinTheBoundsIsShort(t *testing.T) {
	files, req := worstWithinBounds()
	rules, err := cedar.Engine{}.Compile(files)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := rules.Evaluate(context.Background(), req)
	took := time.Since(start)
	if err != nil || d.Effect != policy.Deny || d.Rule == policy.RuleInputBound {
		t.Errorf("Evaluate = %+v, %v; want a denial by the bundle's rules", d, err)
	}
	if took > hostileLimit {
		t.Errorf("the decision took %v; want under %v", took, hostileLimit)
	}
}

// BenchmarkWorstWithinBounds is the cost of that request.
func BenchmarkWorstWithinBounds(b *testing.B) {
	files, req := worstWithinBounds()
	rules, err := cedar.Engine{}.Compile(files)
	if err != nil {
		b.Fatal(err)
	}
	policytest.BenchDecide(b, rules, req)
}
