package policy_test

import (
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/policy"
)

func TestCombine(t *testing.T) {
	t.Parallel()
	finance := &policy.Approval{Group: "finance"}
	two := &policy.Approval{Group: "treasury", Approvers: 2}
	manager := &policy.Approval{Manager: true}
	tests := []struct {
		name                       string
		denies, approvals, permits []policy.Finding
		want                       policy.Decision
	}{
		{
			name: "nothing applies",
			want: policy.Decision{Effect: policy.Deny, Reason: "no rule allows this call"},
		},
		{
			name:    "a permit allows, with its own reason",
			permits: []policy.Finding{{Rule: "b", Reason: "b allows"}, {Rule: "a"}},
			want:    policy.Decision{Effect: policy.Allow, Rule: "a", Reason: "allowed by rule a"},
		},
		{
			name:    "a deny wins over a permit and an approval",
			denies:  []policy.Finding{{Rule: "z", Reason: "z denies"}, {Rule: "y", Reason: "y denies"}},
			permits: []policy.Finding{{Rule: "a"}}, approvals: []policy.Finding{{Rule: "m", Approval: finance}},
			want: policy.Decision{Effect: policy.Deny, Rule: "y", Reason: "y denies"},
		},
		{
			name:   "a deny without a reason gets one",
			denies: []policy.Finding{{Rule: "y"}},
			want:   policy.Decision{Effect: policy.Deny, Rule: "y", Reason: "denied by rule y"},
		},
		{
			name:      "an approval without a permit does not grant",
			approvals: []policy.Finding{{Rule: "m", Approval: finance}},
			want:      policy.Decision{Effect: policy.Deny, Reason: "no rule allows this call"},
		},
		{
			name:      "an approval tightens a permit",
			permits:   []policy.Finding{{Rule: "a"}},
			approvals: []policy.Finding{{Rule: "m", Reason: "big", Approval: finance}},
			want:      policy.Decision{Effect: policy.RequireApproval, Rule: "m", Reason: "big", Approval: &policy.Approval{Group: "finance"}},
		},
		{
			name:    "routes merge to the strictest, in rule order",
			permits: []policy.Finding{{Rule: "a"}},
			approvals: []policy.Finding{
				{Rule: "q", Reason: "weekend", Approval: two},
				{Rule: "p", Reason: "manager", Approval: manager},
				{Rule: "r", Reason: "big", Approval: finance},
				{Rule: "s", Reason: "big", Approval: finance},
			},
			want: policy.Decision{
				Effect: policy.RequireApproval, Rule: "p", Reason: "manager; weekend; big",
				Approval: &policy.Approval{Group: "treasury", Approvers: 2, Manager: true},
			},
		},
		{
			// An engine may emit one rule's findings in any order: the
			// decision is the same whichever it emits first.
			name:   "one rule's denies are read in their reasons' order",
			denies: []policy.Finding{{Rule: "y", Reason: "y: over the limit"}, {Rule: "y", Reason: "y: at night"}},
			want:   policy.Decision{Effect: policy.Deny, Rule: "y", Reason: "y: at night"},
		},
		{
			name:      "one rule's approvals are read in their reasons' order",
			permits:   []policy.Finding{{Rule: "a"}},
			approvals: []policy.Finding{{Rule: "m", Reason: "m: weekend"}, {Rule: "m", Reason: "m: big"}},
			want:      policy.Decision{Effect: policy.RequireApproval, Rule: "m", Reason: "m: big; m: weekend", Approval: &policy.Approval{}},
		},
		{
			name:      "an approval with no route is the tool's own approvers",
			permits:   []policy.Finding{{Rule: "a"}},
			approvals: []policy.Finding{{Rule: "m"}},
			want:      policy.Decision{Effect: policy.RequireApproval, Rule: "m", Reason: "rule m requires a person's approval", Approval: &policy.Approval{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := policy.Combine(tt.denies, tt.approvals, tt.permits); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Combine = %+v (approval %+v), want %+v (approval %+v)", got, got.Approval, tt.want, tt.want.Approval)
			}
		})
	}
}
