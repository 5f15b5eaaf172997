package policytoy_test

import (
	"encoding/json"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/policytoy"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/policy/rego"
)

// The same bundle in the three languages: refunds permitted, big refunds
// and huge refunds asking different groups (so a huge one matches both),
// transfers asking finance with no rule permitting them, and wiping files
// permitted but also forbidden.
const (
	toyRules = `[
		{"id": "grant-refunds", "effect": "permit", "tool": "payments.refund_order"},
		{"id": "huge-refund", "effect": "approve", "tool": "payments.refund_order", "arg": "amount_cents", "over": 100000,
		 "approval": {"group": "treasury", "approvers": 2}},
		{"id": "big-refund", "effect": "approve", "tool": "payments.refund_order", "arg": "amount_cents", "over": 50000,
		 "approval": {"group": "finance", "approvers": 1}},
		{"id": "transfer-asks", "effect": "approve", "tool": "payments.transfer",
		 "approval": {"group": "finance", "approvers": 1}},
		{"id": "grant-wipe", "effect": "permit", "tool": "files.wipe"},
		{"id": "no-wipe", "effect": "forbid", "tool": "files.wipe"}
	]`
	cedarRules = `
@id("grant-refunds")
permit (principal, action, resource == Tool::"payments.refund_order");

@id("huge-refund")
@approval("treasury")
@approvers("2")
forbid (principal, action, resource == Tool::"payments.refund_order")
when { context.arguments has amount_cents && context.arguments.amount_cents > 100000 };

@id("big-refund")
@approval("finance")
@approvers("1")
forbid (principal, action, resource == Tool::"payments.refund_order")
when { context.arguments has amount_cents && context.arguments.amount_cents > 50000 };

@id("transfer-asks")
@approval("finance")
@approvers("1")
forbid (principal, action, resource == Tool::"payments.transfer");

@id("grant-wipe")
permit (principal, action, resource == Tool::"files.wipe");

@id("no-wipe")
forbid (principal, action, resource == Tool::"files.wipe");
`
	regoRules = `package toolplane.authz

allow contains "grant-refunds" if input.tool.name == "payments.refund_order"

approval contains {"rule": "huge-refund", "group": "treasury", "approvers": 2} if {
	input.tool.name == "payments.refund_order"
	input.arguments.amount_cents > 100000
}

approval contains {"rule": "big-refund", "group": "finance", "approvers": 1} if {
	input.tool.name == "payments.refund_order"
	input.arguments.amount_cents > 50000
}

approval contains {"rule": "transfer-asks", "group": "finance", "approvers": 1} if input.tool.name == "payments.transfer"

allow contains "grant-wipe" if input.tool.name == "files.wipe"

deny contains {"rule": "no-wipe"} if input.tool.name == "files.wipe"
`
)

// withSchema answers files plus the schema of the language's conformance
// bundle, which declares the arguments the rules read.
func withSchema(t *testing.T, language, schema string, files map[string]string) map[string]string {
	t.Helper()
	conf, err := policytest.Bundle(language)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := conf[schema]
	if !ok {
		t.Fatalf("the %s conformance bundle has no %s", language, schema)
	}
	files[path.Base(schema)] = s
	return files
}

// TestCombinesAsTheRealEngines decides one bundle, written in the toy
// language, Cedar and Rego, and wants the three decisions identical: the
// toy engine must combine what its rules found with policy.Combine, so the
// rules and CLI tests that use it see the combining the real engines use.
// An approve with no permit must deny (approval only tightens), and two
// approves that match must merge into the strictest route.
func TestCombinesAsTheRealEngines(t *testing.T) {
	t.Parallel()
	engines := map[string]struct {
		engine policy.Engine
		files  map[string]string
	}{
		"toy":   {policytoy.Toy{}, map[string]string{"rules.toy": toyRules}},
		"cedar": {cedar.Engine{}, withSchema(t, "cedar", cedar.SchemaFile, map[string]string{"rules.cedar": cedarRules})},
		"rego":  {rego.Engine{Budget: time.Minute}, withSchema(t, "rego", rego.SchemaFile, map[string]string{"rules.rego": regoRules})},
	}
	compiled := map[string]policy.Rules{}
	for name, e := range engines {
		r, err := e.engine.Compile(e.files)
		if err != nil {
			t.Fatalf("%s: Compile = %v", name, err)
		}
		compiled[name] = r
	}
	for _, c := range []struct {
		name    string
		request string
		want    policy.Decision
	}{
		{"an approve with no permit denies", `{"tool": {"name": "payments.transfer"}, "arguments": {"amount_cents": 100}}`,
			policy.Decision{Effect: policy.Deny, Reason: "no rule allows this call"}},
		{"a permit allows", `{"tool": {"name": "payments.refund_order"}, "arguments": {"amount_cents": 100}}`,
			policy.Decision{Effect: policy.Allow, Rule: "grant-refunds", Reason: "allowed by rule grant-refunds"}},
		{"a permitted call one approve matches asks", `{"tool": {"name": "payments.refund_order"}, "arguments": {"amount_cents": 60000}}`,
			policy.Decision{Effect: policy.RequireApproval, Rule: "big-refund", Reason: "rule big-refund requires a person's approval",
				Approval: &policy.Approval{Group: "finance", Approvers: 1}}},
		{"two approves merge into the strictest route", `{"tool": {"name": "payments.refund_order"}, "arguments": {"amount_cents": 150000}}`,
			policy.Decision{Effect: policy.RequireApproval, Rule: "big-refund",
				Reason:   "rule big-refund requires a person's approval; rule huge-refund requires a person's approval",
				Approval: &policy.Approval{Group: "finance", Approvers: 2}}},
		{"a forbid wins over a permit", `{"tool": {"name": "files.wipe"}}`,
			policy.Decision{Effect: policy.Deny, Rule: "no-wipe", Reason: "denied by rule no-wipe"}},
		{"nothing matches: denied", `{"tool": {"name": "crm.lookup"}}`,
			policy.Decision{Effect: policy.Deny, Reason: "no rule allows this call"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var req policy.Request
			if err := json.Unmarshal([]byte(c.request), &req); err != nil {
				t.Fatal(err)
			}
			want := show(c.want)
			for _, name := range []string{"cedar", "rego", "toy"} {
				d, err := compiled[name].Evaluate(t.Context(), &req)
				if err != nil {
					t.Fatalf("%s: Evaluate = %v", name, err)
				}
				if got := show(d); got != want {
					t.Errorf("%s decides %s; want %s", name, got, want)
				}
			}
		})
	}
}

// show writes the parts of a decision the engines must agree on.
func show(d policy.Decision) string {
	return fmt.Sprintf("%s rule %q reason %q route %+v", d.Effect, d.Rule, d.Reason, d.Approval)
}
