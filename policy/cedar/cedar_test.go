package cedar_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
)

const permitAll = `@id("all") permit (principal, action, resource);`

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		file  string // the file the error names
		line  int
		msg   string // substring of the message
	}{
		{
			name:  "a syntax error",
			files: map[string]string{"a.cedar": "permit (principal, action, resource"},
			file:  "a.cedar", msg: "parse error",
		},
		{
			name:  "an attribute the tool does not have",
			files: map[string]string{"a.cedar": "\n@id(\"x\")\npermit (principal, action, resource) when { resource.colour == \"red\" };"},
			file:  "a.cedar", line: 2, msg: "colour",
		},
		{
			name:  "an argument the schema does not declare",
			files: map[string]string{"a.cedar": `permit (principal, action, resource) when { context.arguments.amount > 5 };`},
			file:  "a.cedar", line: 1, msg: "amount",
		},
		{
			name: "an optional argument read without has",
			files: map[string]string{
				"a.cedar":            `permit (principal, action, resource) when { context.arguments.amount > 5 };`,
				"schema.cedarschema": `type Arguments = { amount?: Long };`,
			},
			file: "a.cedar", line: 1, msg: "amount",
		},
		{
			name: "an argument compared as the wrong type",
			files: map[string]string{
				"a.cedar":            `permit (principal, action, resource) when { context.arguments has amount && context.arguments.amount == "5" };`,
				"schema.cedarschema": `type Arguments = { amount?: Long };`,
			},
			file: "a.cedar", line: 1,
		},
		{
			name:  "an unknown action",
			files: map[string]string{"a.cedar": `permit (principal, action == Action::"read", resource);`},
			file:  "a.cedar", line: 1, msg: "read",
		},
		{
			name:  "an approval on a permit",
			files: map[string]string{"a.cedar": `@approval("finance") permit (principal, action, resource);`},
			file:  "a.cedar", line: 1, msg: "forbid",
		},
		{
			name:  "approvers that are not a number",
			files: map[string]string{"a.cedar": permitAll + "\n" + `@approval @approvers("two") forbid (principal, action, resource);`},
			file:  "a.cedar", line: 2, msg: "@approvers",
		},
		{
			name:  "approvers without an approval",
			files: map[string]string{"a.cedar": `@approvers("2") forbid (principal, action, resource);`},
			file:  "a.cedar", line: 1, msg: "@approval",
		},
		{
			name:  "an id used twice",
			files: map[string]string{"a.cedar": permitAll, "b.cedar": permitAll},
			file:  "b.cedar", line: 1, msg: "twice",
		},
		{
			name:  "a schema declaring an entity",
			files: map[string]string{"a.cedar": permitAll, "schema.cedarschema": "entity Order;"},
			file:  "schema.cedarschema", msg: "only the types",
		},
		{
			name:  "a file of no known kind",
			files: map[string]string{"a.cedar": permitAll, "rules.txt": "x"},
			file:  "rules.txt", msg: "not a Cedar bundle file",
		},
		{
			name:  "no policy at all",
			files: map[string]string{"README.md": "nothing"},
			msg:   "no Cedar policy",
		},
		{
			name:  "a test table that does not parse",
			files: map[string]string{"a.cedar": permitAll, "tests.yaml": "tests:\n  - name: x\n    expect: maybe\n"},
			file:  "tests.yaml", line: 2, msg: "maybe",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := cedar.Engine{}.Compile(tt.files)
			var be *policy.BundleError
			if !errors.As(err, &be) {
				t.Fatalf("Compile = %v, want a *policy.BundleError", err)
			}
			if be.File != tt.file || be.Line != tt.line || !strings.Contains(be.Msg, tt.msg) {
				t.Errorf("Compile = %q (file %q line %d), want file %q line %d containing %q", be, be.File, be.Line, tt.file, tt.line, tt.msg)
			}
		})
	}
}

func request() *policy.Request {
	return &policy.Request{
		Principal: policy.Principal{Agent: "a", Roles: []string{"support"}},
		Tool:      policy.Tool{Name: "payments.refund_order"},
		Arguments: map[string]any{"amount": 12.0},
		Context:   policy.Context{Time: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC), Hour: 10, Weekday: 2},
	}
}

func TestEvaluateFaults(t *testing.T) {
	t.Parallel()
	rules, err := cedar.Engine{}.Compile(map[string]string{
		"a.cedar":            permitAll + "\n" + `@id("big") forbid (principal, action, resource) when { context.arguments has amount && context.arguments.amount > 100 };`,
		"schema.cedarschema": `type Arguments = { amount?: Long };`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := rules.Evaluate(ctx, request()); err != nil || d.Effect != policy.Allow {
		t.Fatalf("a well-typed request: %+v, %v; want allow", d, err)
	}
	// An argument whose type is not the one declared makes the forbid
	// fail to evaluate: Cedar would skip it and allow; the engine stops.
	r := request()
	r.Arguments = map[string]any{"amount": "a lot"}
	if d, err := rules.Evaluate(ctx, r); err == nil {
		t.Errorf("an argument of another type: %+v, want a fault", d)
	}
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if _, err := rules.Evaluate(expired, request()); !errors.Is(err, policy.ErrBudget) {
		t.Errorf("a spent budget: %v, want ErrBudget", err)
	}
}

func TestTestReportsFailures(t *testing.T) {
	t.Parallel()
	rules, err := cedar.Engine{}.Compile(map[string]string{
		"a.cedar": permitAll,
		"tests.json": `{"tests": [
			{"name": "allowed", "request": {"principal": {"agent": "a"}, "tool": {"name": "t"}}, "expect": "allow", "rule": "all"},
			{"name": "wrongly expected", "request": {"principal": {"agent": "a"}, "tool": {"name": "t"}}, "expect": "deny"}
		]}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	results, err := rules.Test(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || !results[0].Pass || results[1].Pass || !strings.Contains(results[1].Message, "want deny") {
		t.Errorf("Test = %+v, want the first to pass and the second to fail naming deny", results)
	}
}
