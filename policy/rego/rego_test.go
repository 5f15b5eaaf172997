package rego_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/rego"
)

const allowAll = "package toolplane.authz\n\nallow := true\n"

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
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if {\n"},
			file:  "a.rego", line: 4, msg: "eof",
		},
		{
			name:  "an attribute the tool does not have",
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if {\n\tinput.tool.colour == \"red\"\n}\n"},
			file:  "a.rego", line: 4, msg: "colour",
		},
		{
			name:  "a member the request does not have",
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if input.weather == \"fine\"\n"},
			file:  "a.rego", line: 3, msg: "weather",
		},
		{
			name: "an argument the schema does not declare, when it declares them",
			files: map[string]string{
				"a.rego":      "package toolplane.authz\n\nallow if input.arguments.amount > 5\n",
				"schema.json": `{"arguments": {"type": "object", "additionalProperties": false, "properties": {"amount_cents": {"type": "integer"}}}}`,
			},
			file: "a.rego", line: 3, msg: "amount",
		},
		{
			name:  "http.send",
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if http.send({\"method\": \"get\", \"url\": \"http://127.0.0.1/\"}).status_code == 200\n"},
			file:  "a.rego", line: 3, msg: "http.send",
		},
		{
			name:  "the clock",
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if time.now_ns() > 0\n"},
			file:  "a.rego", line: 3, msg: "time.now_ns",
		},
		{
			name:  "a network lookup",
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if count(net.lookup_ip_addr(\"example.com\")) > 0\n"},
			file:  "a.rego", line: 3, msg: "net.lookup_ip_addr",
		},
		{
			name:  "recursion",
			files: map[string]string{"a.rego": "package toolplane.authz\n\nallow if loop\n\nloop if loop\n"},
			file:  "a.rego", msg: "recursive",
		},
		{
			name:  "toolplane's own package",
			files: map[string]string{"a.rego": allowAll, "b.rego": "package toolplane.internal\n\nx := 1\n"},
			file:  "b.rego", line: 1, msg: "toolplane's own",
		},
		{
			name:  "no rules package",
			files: map[string]string{"a.rego": "package other\n\nallow := true\n"},
			msg:   "toolplane.authz",
		},
		{
			name:  "a schema naming no open part",
			files: map[string]string{"a.rego": allowAll, "schema.json": `{"tool": {}}`},
			file:  "schema.json", msg: "not an open part",
		},
		{
			name:  "a file of no known kind",
			files: map[string]string{"a.rego": allowAll, "rules.txt": "x"},
			file:  "rules.txt", msg: "not a Rego bundle file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rego.Engine{}.Compile(tt.files)
			var be *policy.BundleError
			if !errors.As(err, &be) {
				t.Fatalf("Compile = %v, want a *policy.BundleError", err)
			}
			if be.File != tt.file || (tt.line != 0 && be.Line != tt.line) || !strings.Contains(be.Msg, tt.msg) {
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
	ctx := context.Background()
	tests := []struct {
		name        string
		rules       string
		budget      time.Duration
		budgetFault bool
	}{
		{
			name:  "a deny of the wrong shape",
			rules: allowAll + "\ndeny contains 42\n",
		},
		{
			name:  "an approval with a misspelt member",
			rules: allowAll + "\napproval contains {\"rule\": \"x\", \"aprovers\": 2}\n",
		},
		{
			name:  "a built-in failing",
			rules: allowAll + "\ndeny contains \"x\" if to_number(\"many\") > 1\n",
		},
		{
			name:   "a rule past its budget",
			rules:  allowAll + "\ndeny contains \"slow\" if {\n\tcount([x | some x in numbers.range(1, 100000000); x % 7 == 0]) > 0\n}\n",
			budget: 20 * time.Millisecond, budgetFault: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rules, err := rego.Engine{Budget: tt.budget}.Compile(map[string]string{"a.rego": tt.rules})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d, err := rules.Evaluate(ctx, request())
			if err == nil {
				t.Fatalf("Evaluate = %+v, want a fault", d)
			}
			if got := errors.Is(err, policy.ErrBudget); got != tt.budgetFault {
				t.Errorf("Evaluate = %v; a budget fault %v, want %v", err, got, tt.budgetFault)
			}
			if tt.budgetFault && time.Since(start) > 2*time.Second {
				t.Errorf("the evaluation took %s past a budget of %s", time.Since(start), tt.budget)
			}
		})
	}
}

func TestTestRunsOPATests(t *testing.T) {
	t.Parallel()
	rules, err := rego.Engine{}.Compile(map[string]string{
		"a.rego": allowAll,
		"a_test.rego": "package toolplane.authz_test\n\nimport data.toolplane.authz\n\n" +
			"test_allows if authz.allow\n\ntest_wrong if not authz.allow\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	results, err := rules.Test(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range results {
		got[r.Name] = r.Pass
	}
	want := map[string]bool{"toolplane.authz_test.test_allows": true, "toolplane.authz_test.test_wrong": false}
	if len(got) != len(want) || got["toolplane.authz_test.test_allows"] != true || got["toolplane.authz_test.test_wrong"] != false {
		t.Errorf("Test = %+v, want %v", results, want)
	}
}
