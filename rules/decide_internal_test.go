package rules

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

// Only a read that changes nothing and needs no person may be decided on
// last known rules while the store cannot be read: a write, a destructive
// tool or one that requires approval fails closed, annotated fail_open or
// not.
func TestOnlyASafeReadFailsOpen(t *testing.T) {
	t.Parallel()
	read := func(change func(*toolplane.Definition)) *toolplane.Definition {
		d := &toolplane.Definition{Effect: toolplane.EffectRead, Annotations: toolplane.Annotations{FailOpen: true}}
		if change != nil {
			change(d)
		}
		return d
	}
	tests := []struct {
		name string
		d    *toolplane.Definition
		want bool
	}{
		{"a fail_open read", read(nil), true},
		{"a read not annotated", read(func(d *toolplane.Definition) { d.Annotations.FailOpen = false }), false},
		{"a write", read(func(d *toolplane.Definition) { d.Effect = toolplane.EffectWrite }), false},
		{"a destructive read", read(func(d *toolplane.Definition) { d.Annotations.Destructive = true }), false},
		{"a read that requires approval", read(func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true }), false},
	}
	for _, tt := range tests {
		if got := failOpen(tt.d); got != tt.want {
			t.Errorf("%s: failOpen = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A rule asking the requesting user's manager routes to that person, and
// is a denial when no manager is known: never an approval anyone may
// answer. A rule that allowed a call the grants send to a person did not
// decide it, and is not recorded as the rule that did.
func TestCombineRoutesToTheManagerOrDenies(t *testing.T) {
	t.Parallel()
	allow := policy.Decision{Effect: policy.Allow}
	manager := policy.Decision{Effect: policy.RequireApproval, Rule: "boss", Reason: "over budget", Approval: &policy.Approval{Manager: true}}
	for _, u := range []*policy.Person{nil, {ID: "user-sam"}} {
		if d := combine(allow, manager, &policy.Request{User: u}); d.Effect != policy.Deny || d.Rule != "boss" {
			t.Errorf("user %+v with no manager: %+v; want denied by rule boss", u, d)
		}
	}
	d := combine(allow, manager, &policy.Request{User: &policy.Person{ID: "user-sam", Manager: "max"}})
	if d.Effect != policy.RequireApproval || d.Approval == nil || d.Approval.Person != "max" || d.Reason != "over budget" {
		t.Errorf("user with manager max: %+v (approval %+v); want max to approve", d, d.Approval)
	}
	asked := policy.Decision{Effect: policy.RequireApproval, Reason: "the tool requires approval"}
	d = combine(asked, policy.Decision{Effect: policy.Allow, Rule: "reads", Bundle: 3}, &policy.Request{})
	if d.Effect != policy.RequireApproval || d.Rule != "" || d.Bundle != 3 || d.Reason != "the tool requires approval" {
		t.Errorf("grants asking a person, rules allowing: %+v; want the grants' approval, no rule, bundle 3", d)
	}
}
