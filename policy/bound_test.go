package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/policy"
)

// The open parts are counted whole against each bound, and a request past
// one is decided as a denial naming the member and the bound.
func TestInputBounds(t *testing.T) {
	t.Parallel()
	many := func(n int, v any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	wide := map[string]any{}
	for i := range policy.MaxInputValues {
		wide[fmt.Sprint("k", i)] = i
	}
	tests := []struct {
		name string
		req  policy.Request
		path string // "" when within the bounds
		what string
	}{
		{name: "small", req: policy.Request{Arguments: map[string]any{"a": []any{1, "x", map[string]any{"b": true}}}}},
		{name: "an array at the bound", req: policy.Request{Arguments: map[string]any{"a": many(policy.MaxInputArray, 1)}}},
		{name: "an array past it", req: policy.Request{Arguments: map[string]any{"a": many(policy.MaxInputArray+1, 1)}},
			path: "arguments.a", what: fmt.Sprint(policy.MaxInputArray+1, " elements")},
		{name: "a nested array past it", req: policy.Request{Facts: map[string]any{"o": map[string]any{"l": []any{many(policy.MaxInputArray+1, 1)}}}},
			path: "facts.o.l[0]", what: fmt.Sprint(policy.MaxInputArray+1, " elements")},
		{name: "too many values in all", req: policy.Request{Arguments: map[string]any{"a": many(200, many(60, 1))}},
			path: "arguments.a", what: "10000 values"},
		{name: "too much text", req: policy.Request{User: &policy.Person{Attributes: map[string]any{"bio": strings.Repeat("x", policy.MaxInputText+1)}}},
			path: "user.attributes.bio", what: "bytes of text"},
		{name: "a long member name, shortened in the reason", req: policy.Request{Arguments: map[string]any{strings.Repeat("n", 500): many(policy.MaxInputArray+1, 1)}},
			path: "arguments." + strings.Repeat("n", 120-len("arguments.")) + "… holds", what: "elements"},
		{name: "attributes counted", req: policy.Request{Principal: policy.Principal{Attributes: wide}},
			path: "principal.attributes", what: "values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b policy.InputBudget
			err := b.CheckOpenParts(&tt.req)
			if tt.path == "" {
				if err != nil {
					t.Fatalf("CheckOpenParts = %v; want none", err)
				}
				return
			}
			d, ok := policy.AsBound(err)
			if !ok {
				t.Fatalf("CheckOpenParts = %v; want an *InputBoundError", err)
			}
			if d.Effect != policy.Deny || d.Rule != policy.RuleInputBound || !strings.Contains(d.Reason, tt.what) ||
				!strings.HasPrefix(err.Error(), tt.path) {
				t.Errorf("the decision = %s by %q (%s), error %q; want a denial by %s at %s naming %q",
					d.Effect, d.Rule, d.Reason, err, policy.RuleInputBound, tt.path, tt.what)
			}
		})
	}
}
