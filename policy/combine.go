package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Finding is one rule of a bundle that applied to a request: a deny, an
// approval requirement or a permit. Engines report what their rules found
// and Combine decides, so every engine combines the same way.
type Finding struct {
	// Rule is the rule's id.
	Rule string
	// Reason is the rule's own reason; "" lets Combine write one.
	Reason string
	// Approval is the route an approval rule asks for (nil elsewhere).
	Approval *Approval
}

// Combine decides from what a bundle's rules found:
//
//   - any deny wins; the decision names the deny whose rule id sorts first;
//   - else, when some rule permits, any approval rule that applied makes it
//     RequireApproval, with the routes merged (see MergeApprovals);
//   - else a permit allows;
//   - and with no permit the call is denied: nothing allows it.
//
// An approval rule only ever tightens: it never allows a call no permit
// allows, so publishing one cannot widen what a bundle grants.
func Combine(denies, approvals, permits []Finding) Decision {
	if len(denies) > 0 {
		d := first(denies)
		return Decision{Effect: Deny, Rule: d.Rule, Reason: reasonOr(d, "denied by rule "+d.Rule)}
	}
	if len(permits) == 0 {
		return Decision{Effect: Deny, Reason: "no rule allows this call"}
	}
	if len(approvals) > 0 {
		return MergeApprovals(approvals)
	}
	p := first(permits)
	return Decision{Effect: Allow, Rule: p.Rule, Reason: reasonOr(p, "allowed by rule "+p.Rule)}
}

// MergeApprovals makes one RequireApproval decision of several approval
// rules, deterministically and keeping the strictest of each demand: the
// most approvers any rule asks for; the manager when any rule asks for
// them; the group of the first rule (by id) that names one. Reasons are
// joined in rule id order so the approver reads every one; Rule names the
// first rule.
func MergeApprovals(approvals []Finding) Decision {
	sorted := slices.Clone(approvals)
	slices.SortFunc(sorted, byRule)
	var route Approval
	var reasons []string
	for _, a := range sorted {
		if a.Approval != nil {
			if route.Group == "" {
				route.Group = a.Approval.Group
			}
			route.Approvers = max(route.Approvers, a.Approval.Approvers)
			route.Manager = route.Manager || a.Approval.Manager
		}
		r := reasonOr(a, fmt.Sprintf("rule %s requires a person's approval", a.Rule))
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	return Decision{
		Effect:   RequireApproval,
		Rule:     sorted[0].Rule,
		Reason:   strings.Join(reasons, "; "),
		Approval: &route,
	}
}

// byRule orders findings by rule id, then reason (two reasons of one rule,
// or rules without ids, as Rego's plain deny strings are).
func byRule(a, b Finding) int {
	if c := cmp.Compare(a.Rule, b.Rule); c != 0 {
		return c
	}
	return cmp.Compare(a.Reason, b.Reason)
}

func first(fs []Finding) Finding { return slices.MinFunc(fs, byRule) }

func reasonOr(f Finding, fallback string) string {
	if f.Reason != "" {
		return f.Reason
	}
	return fallback
}
