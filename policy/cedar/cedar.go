// Package cedar is the Cedar rule engine: it compiles an organization's
// bundle of Cedar policies, checked against a Cedar schema of the Request
// document, and decides requests with cedar-go.
//
// A request maps to Cedar as follows (docs/policy.md has the whole
// mapping): the principal is Agent::"<agent>", a member of Role::"<role>"
// for each of its roles and of Team::"<team>"; the action is
// Action::"call"; the resource is Tool::"<name>"; the person a call acts
// for is context.user, a User entity in Group::"<group>" and Role::"<role>";
// the context record carries arguments, facts, time, hour, weekday,
// run_cost_cents and source.
//
// Policies speak through annotations:
//
//	@id("refund-limit")        the rule's id: what Decision.Rule names
//	@reason("...")             a deny's reason (shown to the model), or an
//	                           approval's (shown to the approver)
//	@approval("finance")       this forbid asks a person instead of denying;
//	                           the value is the approver group ("" for the
//	                           tool's own approvers)
//	@approvers("2")            with @approval: distinct approvers needed
//	@manager                   with @approval: the user's manager approves
//
// A forbid without @approval denies; a forbid with it requires approval
// when some permit allows the call; a permit allows. policy.Combine decides
// from what matched. A bundle that loses its annotations stays safe: its
// approval rules become plain forbids.
package cedar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	cedargo "github.com/cedar-policy/cedar-go"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"

	"github.com/toolplane/toolplane/policy"
)

// Language is the name of the rule language.
const Language = "cedar"

// maxPolicies bounds a bundle. A Cedar evaluation has no loops and no
// recursion: its cost grows with the number of policies and the size of
// the values they read, and both are bounded (the values by
// policy.MaxInputValues and policy.MaxInputArray, counted as the request
// is converted, before any rule runs), so every decision is short.
// cedar-go cannot stop an evaluation part way, so a bundle's policies are
// decided in slices of sliceSize and the context is read before each: a
// deadline stops the decision at the next slice, as an error wrapping
// policy.ErrBudget, never as a decision.
const maxPolicies = 10000

// sliceSize is the number of policies decided between two readings of the
// context.
const sliceSize = 64

// maxApprovers bounds @approvers: more distinct people than any real
// approver group holds is a mistake in the bundle.
const maxApprovers = 10

// Engine compiles Cedar bundles. The zero value is ready to use.
type Engine struct{}

// Language implements policy.Engine.
func (Engine) Language() string { return Language }

// rule is what a compiled policy says beside its condition.
type rule struct {
	id       string
	reason   string
	approval *policy.Approval
}

// Rules is a compiled Cedar bundle.
type Rules struct {
	// decide holds the permits and the plain forbids; approve the forbids
	// carrying @approval, asked only when decide permits. Each is cut in
	// slices of at most sliceSize policies.
	decide  []*cedargo.PolicySet
	approve []*cedargo.PolicySet
	rules   map[cedargo.PolicyID]rule
	// shapes are the declared types of the open parts: what a decision
	// converts of a request.
	shapes shapes
	cases  []policy.Case
}

// Compile implements policy.Engine. Files ending in .cedar hold policies;
// schema.cedarschema declares the open parts of the Request; test tables
// (policy.IsCaseFile) hold the bundle's tests; .md files are ignored.
func (e Engine) Compile(files map[string]string) (policy.Rules, error) {
	return e.compile(files)
}

func (Engine) compile(files map[string]string) (*Rules, error) {
	r := &Rules{rules: map[cedargo.PolicyID]rule{}}
	type parsed struct {
		file string
		p    *cedargo.Policy
		id   cedargo.PolicyID
	}
	var all []parsed
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		content := files[name]
		switch {
		case path.Base(name) == SchemaFile:
			continue // read below, once every file is known
		case policy.IsCaseFile(name):
			cases, err := policy.ParseCases(name, []byte(content))
			if err != nil {
				return nil, err
			}
			r.cases = append(r.cases, cases...)
		case path.Ext(name) == ".md":
		case path.Ext(name) == ".cedar":
			list, err := cedargo.NewPolicyListFromBytes(name, []byte(content))
			if err != nil {
				return nil, &policy.BundleError{File: name, Msg: err.Error()}
			}
			for _, p := range list {
				ru, err := readAnnotations(name, p)
				if err != nil {
					return nil, err
				}
				id := cedargo.PolicyID(ru.id)
				if _, dup := r.rules[id]; dup {
					return nil, &policy.BundleError{File: name, Line: p.Position().Line, Msg: fmt.Sprintf("rule id %q is used twice", ru.id)}
				}
				r.rules[id] = ru
				all = append(all, parsed{file: name, p: p, id: id})
				if ru.approval != nil {
					r.approve = add(r.approve, id, p)
				} else {
					r.decide = add(r.decide, id, p)
				}
			}
		default:
			return nil, &policy.BundleError{File: name, Msg: "not a Cedar bundle file (want .cedar, " + SchemaFile + ", a tests table or .md)"}
		}
	}
	if len(all) == 0 {
		return nil, &policy.BundleError{Msg: "the bundle holds no Cedar policy"}
	}
	if len(all) > maxPolicies {
		return nil, &policy.BundleError{Msg: fmt.Sprintf("the bundle holds %d policies, over the %d a bundle may hold", len(all), maxPolicies)}
	}
	var bundleSchema string
	for _, name := range names {
		if path.Base(name) == SchemaFile {
			if bundleSchema != "" {
				return nil, &policy.BundleError{File: name, Msg: "a bundle has one " + SchemaFile}
			}
			bundleSchema = files[name]
		}
	}
	v, err := validator(bundleSchema)
	if err != nil {
		return nil, &policy.BundleError{File: SchemaFile, Msg: err.Error()}
	}
	for _, pp := range all {
		if err := v.check(string(pp.id), (*xast.Policy)(pp.p.AST())); err != nil {
			return nil, &policy.BundleError{File: pp.file, Line: pp.p.Position().Line, Msg: err.Error()}
		}
	}
	r.shapes = v.shapes
	return r, nil
}

// add adds a policy to the last slice of sets, or to a new one when the
// last is full.
func add(sets []*cedargo.PolicySet, id cedargo.PolicyID, p *cedargo.Policy) []*cedargo.PolicySet {
	full := len(sets) == 0
	if !full {
		n := 0
		for range sets[len(sets)-1].All() {
			n++
		}
		full = n >= sliceSize
	}
	if full {
		sets = append(sets, cedargo.NewPolicySet())
	}
	sets[len(sets)-1].Add(id, p)
	return sets
}

// readAnnotations reads a policy's id, reason and approval route.
func readAnnotations(file string, p *cedargo.Policy) (rule, error) {
	line := p.Position().Line
	bad := func(format string, a ...any) (rule, error) {
		return rule{}, &policy.BundleError{File: file, Line: line, Msg: fmt.Sprintf(format, a...)}
	}
	ann := p.Annotations()
	ru := rule{id: string(ann["id"]), reason: string(ann["reason"])}
	if ru.id == "" {
		if _, ok := ann["id"]; ok {
			return bad("@id is empty")
		}
		ru.id = fmt.Sprintf("%s:%d", file, line)
	}
	group, isApproval := ann["approval"]
	_, hasApprovers := ann["approvers"]
	_, hasManager := ann["manager"]
	if !isApproval {
		if hasApprovers || hasManager {
			return bad("rule %s: @approvers and @manager need @approval", ru.id)
		}
		return ru, nil
	}
	if p.Effect() != cedargo.Forbid {
		return bad("rule %s: @approval belongs on a forbid (a permit never asks for a person)", ru.id)
	}
	route := &policy.Approval{Group: string(group)}
	if hasApprovers {
		n, err := strconv.Atoi(string(ann["approvers"]))
		if err != nil || n < 1 || n > maxApprovers {
			return bad("rule %s: @approvers is %q, want a number from 1 to %d", ru.id, ann["approvers"], maxApprovers)
		}
		route.Approvers = n
	}
	if hasManager {
		switch ann["manager"] {
		case "", "true":
			route.Manager = true
		case "false":
		default:
			return bad("rule %s: @manager is %q, want no value, \"true\" or \"false\"", ru.id, ann["manager"])
		}
	}
	ru.approval = route
	return ru, nil
}

// Evaluate implements policy.Rules. A request whose open parts hold more
// than the rules may read is denied by policy.RuleInputBound, before any
// rule runs.
func (r *Rules) Evaluate(ctx context.Context, req *policy.Request) (policy.Decision, error) {
	if err := ctx.Err(); err != nil {
		return policy.Decision{}, budgetErr(err)
	}
	entities, creq, err := mapRequest(req, &r.shapes)
	if err != nil {
		if d, ok := policy.AsBound(err); ok {
			return d, nil
		}
		return policy.Decision{}, fmt.Errorf("cedar: %w", err)
	}
	var denies, permits, approvals []policy.Finding
	for _, set := range r.decide {
		if err := ctx.Err(); err != nil {
			return policy.Decision{}, budgetErr(err)
		}
		d, diag := cedargo.Authorize(set, entities, creq)
		if err := diagErr(diag); err != nil {
			return policy.Decision{}, err
		}
		// A slice that denies names the forbids that matched; one that
		// allows, the permits. A slice where nothing matched names none.
		for _, reason := range diag.Reasons {
			if d == cedargo.Deny {
				denies = append(denies, r.finding(reason.PolicyID))
			} else {
				permits = append(permits, r.finding(reason.PolicyID))
			}
		}
	}
	if len(denies) == 0 && len(permits) > 0 {
		for _, set := range r.approve {
			if err := ctx.Err(); err != nil {
				return policy.Decision{}, budgetErr(err)
			}
			// Every approval rule is a forbid: a reason is one that matched.
			_, adiag := cedargo.Authorize(set, entities, creq)
			if err := diagErr(adiag); err != nil {
				return policy.Decision{}, err
			}
			for _, reason := range adiag.Reasons {
				approvals = append(approvals, r.finding(reason.PolicyID))
			}
		}
	}
	return policy.Combine(denies, approvals, permits), nil
}

func (r *Rules) finding(id cedargo.PolicyID) policy.Finding {
	ru := r.rules[id]
	return policy.Finding{Rule: ru.id, Reason: ru.reason, Approval: ru.approval}
}

// diagErr makes a fault of any policy that could not be evaluated. Cedar
// itself skips such a policy, which would let an erring forbid allow; a
// fault stops the call instead.
func diagErr(diag cedargo.Diagnostic) error {
	if len(diag.Errors) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(diag.Errors))
	for _, e := range diag.Errors {
		msgs = append(msgs, fmt.Sprintf("rule %s: %s", e.PolicyID, e.Message))
	}
	sort.Strings(msgs)
	return fmt.Errorf("cedar: the rules could not decide: %s", strings.Join(msgs, "; "))
}

// budgetErr names a context that ended before the evaluation finished.
func budgetErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cedar: %w: %w", policy.ErrBudget, err)
	}
	return fmt.Errorf("cedar: %w", err)
}

// Test implements policy.Rules: it decides every case of the bundle's test
// tables.
func (r *Rules) Test(ctx context.Context) ([]policy.TestResult, error) {
	return policy.RunCases(ctx, r, r.cases), nil
}
