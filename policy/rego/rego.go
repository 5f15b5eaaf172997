// Package rego is the Rego rule engine, for organizations whose rules are
// already written for OPA. A bundle is compiled once, against a JSON Schema
// of the Request document and with OPA's capabilities narrowed, into one
// prepared query every decision reuses.
//
// The convention (docs/policy.md has it whole): rules live in package
// toolplane.authz and read the Request as input.
//
//	deny contains msg        msg is the reason shown to the model, or
//	                         {"rule": id, "reason": msg}
//	approval contains a      a = {"rule", "reason", "group", "approvers",
//	                         "manager"}: ask a person
//	allow if { ... }         the call is permitted; or allow contains id,
//	                         or {"rule": id, "reason": msg}, to name the rule
//
// policy.Combine decides from the three, as for Cedar: a deny wins, an
// approval tightens a permitted call, and nothing permitted is denied.
//
// What a bundle cannot do: call a built-in that reaches the network or is
// not deterministic (http.send, net.lookup_ip_addr, time.now_ns,
// rand.intn, uuid.rfc4122, opa.runtime and the like: time comes from
// input.context), recurse (OPA's compiler refuses it), read an attribute
// the Request does not have (the type checker refuses it), or run past its
// time budget or its memory bound (the evaluation is cancelled and answers
// policy.ErrBudget). A request whose open parts hold more than the rules
// may read (policy.MaxInputValues) is denied by policy.RuleInputBound
// before it is converted.
package rego

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/toolplane/toolplane/policy"
)

// Language is the name of the rule language.
const Language = "rego"

// DefaultBudget is the time an evaluation may take when Engine.Budget is
// zero. It is wall time, so it also counts the waits of a starved node:
// generous enough that a busy node does not fault sound decisions, short
// enough that a runaway rule costs a fraction of a core-second.
const DefaultBudget = 250 * time.Millisecond

// maxApprovers bounds an approval's approvers, as for Cedar.
const maxApprovers = 10

// rulesPackage is where a bundle's rules live; decisionPackage is the one
// toolplane adds to read them in a single query.
const (
	rulesPackage    = "toolplane.authz"
	decisionPackage = "toolplane.internal"
)

// decisionModule reads the three documents of the convention, each
// defaulting when the bundle defines no such rule, in one query.
const decisionModule = `package toolplane.internal

deny := x if { x := data.toolplane.authz.deny } else := set()

approval := x if { x := data.toolplane.authz.approval } else := set()

allow := x if { x := data.toolplane.authz.allow } else := false

decision := {"deny": deny, "approval": approval, "allow": allow}
`

// Engine compiles Rego bundles. The zero value is ready to use.
type Engine struct {
	// Budget bounds one evaluation; zero is DefaultBudget. One of a
	// bundle's `opa test` tests may take twice as long.
	Budget time.Duration
	// Memory bounds what one evaluation, or one of a bundle's tests, may
	// allocate; zero is DefaultMemory.
	Memory uint64
}

// Language implements policy.Engine.
func (Engine) Language() string { return Language }

// Rules is a compiled Rego bundle.
type Rules struct {
	query   oparego.PreparedEvalQuery
	budget  time.Duration
	memory  uint64
	schemas *ast.SchemaSet
	// modules are the parsed rule and test modules, compiled again for a
	// test run (OPA's tester adds stages of its own).
	modules map[string]*ast.Module
	hasTest bool
	cases   []policy.Case
}

// capabilities are OPA's, less every built-in that is not deterministic or
// reaches outside the process, and with no network allowed.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return b.Nondeterministic || b.Name == "opa.runtime" || strings.HasPrefix(b.Name, "http.") ||
			b.Name == "net.lookup_ip_addr"
	})
	c.AllowNet = []string{}
	return c
}

func (e Engine) compiler(schemas *ast.SchemaSet) *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(capabilities()).
		WithSchemas(schemas).
		WithDefaultRegoVersion(ast.RegoV1)
}

// Compile implements policy.Engine. Files ending in .rego hold rules
// (_test.rego ones hold `opa test`-style tests); schema.json narrows the
// Request's open parts; test tables (policy.IsCaseFile) hold cases in the
// format every engine runs; .md files are ignored.
func (e Engine) Compile(files map[string]string) (policy.Rules, error) {
	return e.compile(files)
}

func (e Engine) compile(files map[string]string) (*Rules, error) {
	r := &Rules{budget: cmpOr(e.Budget, DefaultBudget), memory: cmp.Or(e.Memory, DefaultMemory), modules: map[string]*ast.Module{}}
	var bundleSchema string
	hasRules := false
	for _, name := range slices.Sorted(maps.Keys(files)) {
		content := files[name]
		switch {
		case path.Base(name) == SchemaFile:
			if bundleSchema != "" {
				return nil, &policy.BundleError{File: name, Msg: "a bundle has one " + SchemaFile}
			}
			bundleSchema = content
		case policy.IsCaseFile(name):
			cases, err := policy.ParseCases(name, []byte(content))
			if err != nil {
				return nil, err
			}
			r.cases = append(r.cases, cases...)
		case path.Ext(name) == ".md":
		case path.Ext(name) == ".rego":
			m, err := ast.ParseModuleWithOpts(name, content, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				return nil, bundleErr(name, err)
			}
			pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
			if pkg == decisionPackage || strings.HasPrefix(pkg, decisionPackage+".") {
				return nil, &policy.BundleError{File: name, Line: m.Package.Location.Row, Msg: "package " + decisionPackage + " is toolplane's own"}
			}
			isTest := strings.HasSuffix(name, "_test.rego")
			if isTest {
				r.hasTest = true
			} else if pkg == rulesPackage {
				hasRules = true
			}
			r.modules[name] = m
		default:
			return nil, &policy.BundleError{File: name, Msg: "not a Rego bundle file (want .rego, " + SchemaFile + ", a tests table or .md)"}
		}
	}
	if !hasRules {
		return nil, &policy.BundleError{Msg: "the bundle has no rules in package " + rulesPackage}
	}
	ss, err := schemaSet(bundleSchema)
	if err != nil {
		return nil, &policy.BundleError{File: SchemaFile, Msg: err.Error()}
	}
	r.schemas = ss
	decision, err := ast.ParseModuleWithOpts("toolplane-decision.rego", decisionModule, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("rego: the decision module: %w", err)
	}
	all := maps.Clone(r.modules)
	all[decision.Package.Location.File] = decision
	c := e.compiler(ss)
	if c.Compile(all); c.Failed() {
		return nil, bundleErr("", c.Errors)
	}
	pq, err := oparego.New(
		oparego.Compiler(c),
		oparego.Store(inmem.New()),
		oparego.Query("data."+decisionPackage+".decision"),
		oparego.StrictBuiltinErrors(true),
	).PrepareForEval(context.Background())
	if err != nil {
		return nil, bundleErr("", err)
	}
	r.query = pq
	// The first evaluations of a prepared query pay for OPA's lazy set-up
	// (milliseconds); paying it here, within the budget, keeps it out of
	// the first calls' budgets. The answer does not matter.
	_, _ = r.Evaluate(context.Background(), &policy.Request{})
	return r, nil
}

// bundleErr makes a *policy.BundleError of OPA's first error, at its file
// and line.
func bundleErr(file string, err error) error {
	var errs ast.Errors
	if errors.As(err, &errs) && len(errs) > 0 {
		e := errs[0]
		be := &policy.BundleError{File: file, Msg: e.Message}
		if e.Location != nil {
			if e.Location.File != "" {
				be.File = e.Location.File
			}
			be.Line = e.Location.Row
		}
		if len(errs) > 1 {
			be.Msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
		}
		return be
	}
	return &policy.BundleError{File: file, Msg: err.Error()}
}

// Evaluate implements policy.Rules.
func (r *Rules) Evaluate(ctx context.Context, req *policy.Request) (policy.Decision, error) {
	if err := ctx.Err(); err != nil {
		return policy.Decision{}, budgetErr(err)
	}
	// A rule may read any member of the open parts, so all of them are
	// counted before any is converted. An array costs OPA no more than
	// its elements: only the count of values bounds it.
	budget := policy.InputBudget{Array: policy.MaxInputValues}
	if err := budget.CheckOpenParts(req); err != nil {
		if d, ok := policy.AsBound(err); ok {
			return d, nil
		}
		return policy.Decision{}, fmt.Errorf("rego: input: %w", err)
	}
	input, err := inputValue(req)
	if err != nil {
		return policy.Decision{}, fmt.Errorf("rego: input: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.budget)
	defer cancel()
	ctx, w := watchMemory(ctx, r.memory)
	defer w.stop()
	w.arm()
	rs, err := r.query.Eval(ctx, oparego.EvalParsedInput(input))
	if err != nil {
		if topdown.IsCancel(err) || ctx.Err() != nil {
			return policy.Decision{}, stoppedBy(ctx)
		}
		return policy.Decision{}, fmt.Errorf("rego: the rules could not decide: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return policy.Decision{}, errors.New("rego: the rules gave no decision")
	}
	doc, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return policy.Decision{}, errors.New("rego: the decision is not an object")
	}
	denies, err := denials(doc["deny"])
	if err != nil {
		return policy.Decision{}, err
	}
	approvals, err := approvalRules(doc["approval"])
	if err != nil {
		return policy.Decision{}, err
	}
	permits, err := permitted(doc["allow"])
	if err != nil {
		return policy.Decision{}, err
	}
	return policy.Combine(denies, approvals, permits), nil
}

func budgetErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("rego: %w: %w", policy.ErrBudget, err)
	}
	if err == nil {
		err = context.Canceled
	}
	return fmt.Errorf("rego: %w", err)
}

// denials reads deny: a set of reasons, or of {"rule", "reason"} objects.
func denials(v any) ([]policy.Finding, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("rego: deny is a %T, want a set", v)
	}
	out := make([]policy.Finding, 0, len(items))
	for _, it := range items {
		switch it := it.(type) {
		case string:
			out = append(out, policy.Finding{Reason: it})
		case map[string]any:
			f, err := finding("deny", it, "rule", "reason")
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		default:
			return nil, fmt.Errorf("rego: a deny is a %T, want a string or an object", it)
		}
	}
	return out, nil
}

// approvalRules reads approval: a set of objects.
func approvalRules(v any) ([]policy.Finding, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("rego: approval is a %T, want a set", v)
	}
	out := make([]policy.Finding, 0, len(items))
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rego: an approval is a %T, want an object", it)
		}
		f, err := finding("approval", m, "rule", "reason", "group", "approvers", "manager")
		if err != nil {
			return nil, err
		}
		route := &policy.Approval{}
		if g, ok := m["group"]; ok {
			if route.Group, ok = g.(string); !ok {
				return nil, fmt.Errorf("rego: approval %q: group is a %T, want a string", f.Rule, g)
			}
		}
		if a, ok := m["approvers"]; ok {
			n, isNum := a.(json.Number)
			i, err := n.Int64()
			if !isNum || err != nil || i < 1 || i > maxApprovers {
				return nil, fmt.Errorf("rego: approval %q: approvers is %v, want a number from 1 to %d", f.Rule, a, maxApprovers)
			}
			route.Approvers = int(i)
		}
		if mg, ok := m["manager"]; ok {
			if route.Manager, ok = mg.(bool); !ok {
				return nil, fmt.Errorf("rego: approval %q: manager is a %T, want a boolean", f.Rule, mg)
			}
		}
		f.Approval = route
		out = append(out, f)
	}
	return out, nil
}

// finding reads the rule and reason of an object, refusing members the
// convention does not name (a misspelt "aprovers" would otherwise route
// to fewer people than meant).
func finding(kind string, m map[string]any, allowed ...string) (policy.Finding, error) {
	for k := range m {
		if !slices.Contains(allowed, k) {
			return policy.Finding{}, fmt.Errorf("rego: a %s has member %q (want %s)", kind, k, strings.Join(allowed, ", "))
		}
	}
	var f policy.Finding
	for k, dst := range map[string]*string{"rule": &f.Rule, "reason": &f.Reason} {
		if v, ok := m[k]; ok {
			s, isStr := v.(string)
			if !isStr {
				return policy.Finding{}, fmt.Errorf("rego: a %s's %s is a %T, want a string", kind, k, v)
			}
			*dst = s
		}
	}
	return f, nil
}

// permitted reads allow: a boolean, or a set of the rules that permit,
// each a rule id or a {"rule", "reason"} object.
func permitted(v any) ([]policy.Finding, error) {
	switch v := v.(type) {
	case bool:
		if v {
			return []policy.Finding{{Reason: "allowed"}}, nil
		}
		return nil, nil
	case []any:
		out := make([]policy.Finding, 0, len(v))
		for _, it := range v {
			switch it := it.(type) {
			case string:
				out = append(out, policy.Finding{Rule: it})
			case map[string]any:
				f, err := finding("permit", it, "rule", "reason")
				if err != nil {
					return nil, err
				}
				out = append(out, f)
			default:
				return nil, fmt.Errorf("rego: allow holds a %T, want rule ids or objects", it)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("rego: allow is a %T, want a boolean or a set", v)
}

// Test implements policy.Rules: the bundle's test tables, then its
// `opa test`-style tests (test_ rules in _test.rego files), one at a time,
// each within twice the evaluation budget and within the memory bound. A
// test stopped by its memory bound fails, and the run stops there.
func (r *Rules) Test(ctx context.Context) ([]policy.TestResult, error) {
	out := policy.RunCases(ctx, r, r.cases)
	if !r.hasTest {
		return out, nil
	}
	ctx, w := watchMemory(ctx, r.memory)
	defer w.stop()
	ch, err := tester.NewRunner().
		SetCompiler(Engine{}.compiler(r.schemas)).
		SetModules(r.modules).
		RaiseBuiltinErrors(true).
		SetParallel(1).
		SetTimeout(2*r.budget).
		RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("rego: tests: %w", bundleErr("", err))
	}
	// Armed once the tester has compiled the bundle: what the compiler
	// allocates is no test's.
	w.arm()
	var opa []policy.TestResult
	stoppedAt := ""
	for res := range ch {
		tr := policy.TestResult{Name: strings.TrimPrefix(res.Package, "data.") + "." + res.Name, Pass: res.Pass()}
		switch {
		case stoppedAt != "":
			// Begun as the run was stopped: it did not run.
			tr.Pass, tr.Message = false, "not run: the run stopped at "+stoppedAt
		case errors.Is(context.Cause(ctx), errMemory) && (res.Error != nil || res.Fail):
			stoppedAt = tr.Name
			tr.Pass, tr.Message = false, fmt.Sprintf("stopped: it %v; the run ends here", context.Cause(ctx))
		case res.Error != nil:
			tr.Pass, tr.Message = false, res.Error.Error()
		case res.Fail:
			tr.Message = "the test's body was false"
			if res.FailedAt != nil {
				tr.Message += fmt.Sprintf(" at %s:%d", res.FailedAt.Location.File, res.FailedAt.Location.Row)
			}
		}
		opa = append(opa, tr)
		w.restart()
	}
	slices.SortFunc(opa, func(a, b policy.TestResult) int { return strings.Compare(a.Name, b.Name) })
	return append(out, opa...), nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
