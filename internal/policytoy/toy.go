// Package policytoy is a small rule language for tests of what decides
// with policy bundles (the rules service, the CLI): a real policy.Engine
// that needs no Cedar or Rego, so a test says what a bundle decides in a
// few lines of JSON. It is not the engines' conformance table, which is
// policy/policytest.
//
// A bundle's *.toy files hold JSON rules, its *.tests.json files tests.
// Like the real engines, the toy engine only reports which rules matched
// (forbids, approves, permits) and policy.Combine decides from them, so a
// test driving it through the rules service checks the same combining the
// Cedar and Rego engines use: a matching forbid denies; an approve asks a
// person only when some permit allows the call, its routes merged with
// the other approves'; a permit allows; nothing permitted is denied.
package policytoy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/policy"
)

// Toy is the engine of the language "toy".
type Toy struct{}

type toyRule struct {
	ID     string `json:"id"`
	Effect string `json:"effect"` // permit, forbid, approve
	// Tool is a glob over tool names ("" any).
	Tool string `json:"tool"`
	// Arg and Over: the numeric argument Arg is greater than Over.
	Arg  string  `json:"arg"`
	Over float64 `json:"over"`
	// HoursFrom and HoursTo: the hour of the call is outside [from, to).
	OutsideHours []int            `json:"outside_hours"`
	Approval     *policy.Approval `json:"approval"`
	// Slow spends the evaluation's budget.
	Slow bool `json:"slow"`
}

type toyTest struct {
	Name    string         `json:"name"`
	Request policy.Request `json:"request"`
	Expect  string         `json:"expect"`
	Rule    string         `json:"rule"`
}

type toyRules struct {
	rules []toyRule
	tests []toyTest
}

// Language implements policy.Engine.
func (Toy) Language() string { return "toy" }

// Compile implements policy.Engine: rules from *.toy files, tests from
// *.tests.json files; a file that does not parse is a *policy.BundleError
// with its line.
func (Toy) Compile(files map[string]string) (policy.Rules, error) {
	var r toyRules
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		content := files[name]
		var into any
		switch {
		case path.Ext(name) == ".toy":
			var rs []toyRule
			if err := decode(name, content, &rs); err != nil {
				return nil, err
			}
			for _, x := range rs {
				switch x.Effect {
				case "permit", "forbid", "approve":
				default:
					return nil, &policy.BundleError{File: name, Msg: fmt.Sprintf("rule %s: effect %q is not permit, forbid or approve", x.ID, x.Effect)}
				}
			}
			r.rules = append(r.rules, rs...)
			continue
		case strings.HasSuffix(name, ".tests.json"):
			var ts []toyTest
			into = &ts
			if err := decode(name, content, into); err != nil {
				return nil, err
			}
			r.tests = append(r.tests, ts...)
		}
	}
	return &r, nil
}

// decode reads JSON, refusing unknown fields, with the line of an error.
func decode(name, content string, v any) error {
	dec := json.NewDecoder(strings.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		line := 0
		if se, ok := err.(*json.SyntaxError); ok {
			line = 1 + bytes.Count([]byte(content[:se.Offset]), []byte("\n"))
		}
		return &policy.BundleError{File: name, Line: line, Msg: err.Error()}
	}
	return nil
}

func (x toyRule) matches(r *policy.Request) bool {
	if x.Tool != "" {
		if ok, _ := path.Match(x.Tool, r.Tool.Name); !ok {
			return false
		}
	}
	if x.Arg != "" {
		n, ok := r.Arguments[x.Arg].(float64)
		if !ok {
			if jn, isNum := r.Arguments[x.Arg].(json.Number); isNum {
				n, _ = jn.Float64()
				ok = true
			}
		}
		if !ok || n <= x.Over {
			return false
		}
	}
	if len(x.OutsideHours) == 2 && r.Context.Hour >= x.OutsideHours[0] && r.Context.Hour < x.OutsideHours[1] {
		return false
	}
	return true
}

// Evaluate implements policy.Rules: it reports the rules that match and
// leaves the decision to policy.Combine, as the real engines do.
func (t *toyRules) Evaluate(ctx context.Context, r *policy.Request) (policy.Decision, error) {
	var denies, approvals, permits []policy.Finding
	for i := range t.rules {
		x := &t.rules[i]
		if x.Slow {
			<-ctx.Done()
			return policy.Decision{}, ctx.Err()
		}
		if !x.matches(r) {
			continue
		}
		f := policy.Finding{Rule: x.ID}
		switch x.Effect {
		case "forbid":
			denies = append(denies, f)
		case "approve":
			f.Approval = x.Approval
			approvals = append(approvals, f)
		case "permit":
			permits = append(permits, f)
		}
	}
	return policy.Combine(denies, approvals, permits), nil
}

// Test implements policy.Rules: it decides each of the bundle's tests.
func (t *toyRules) Test(ctx context.Context) ([]policy.TestResult, error) {
	var out []policy.TestResult
	for _, c := range t.tests {
		d, err := t.Evaluate(ctx, &c.Request)
		if err != nil {
			return nil, err
		}
		res := policy.TestResult{Name: c.Name, Pass: d.Effect.String() == c.Expect && (c.Rule == "" || c.Rule == d.Rule)}
		if !res.Pass {
			res.Message = fmt.Sprintf("expected %s (rule %q), decided %s (rule %q)", c.Expect, c.Rule, d.Effect, d.Rule)
		}
		out = append(out, res)
	}
	return out, nil
}
