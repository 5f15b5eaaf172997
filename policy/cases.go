package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Case is one row of a bundle's test table: a request and the decision the
// bundle's rules must give it. The format is the same for every engine, so
// one table can drive a Cedar bundle and its Rego twin.
type Case struct {
	Name    string  `json:"name"`
	Request Request `json:"request"`
	// Expect is the effect the rules must decide.
	Expect Effect `json:"expect"`
	// Rule, when set, is the rule that must decide.
	Rule string `json:"rule,omitempty"`
	// Reason, when set, is the exact reason the decision must carry.
	Reason string `json:"reason,omitempty"`
	// Approval, when set, is the route a require_approval decision must
	// carry.
	Approval *Approval `json:"approval,omitempty"`
}

// IsCaseFile reports whether a bundle file is a test table: tests.yaml,
// tests.yml or tests.json, or a name ending in _tests with one of those
// extensions (refunds_tests.yaml).
func IsCaseFile(name string) bool {
	base := path.Base(name)
	ext := path.Ext(base)
	if ext != ".yaml" && ext != ".yml" && ext != ".json" {
		return false
	}
	stem := strings.TrimSuffix(base, ext)
	return stem == "tests" || strings.HasSuffix(stem, "_tests")
}

// ParseCases reads a test table: an object whose "tests" member lists the
// cases, in YAML, or in JSON when the file name ends in .json. An
// unreadable table is a *BundleError at the line of the case at fault.
func ParseCases(file string, data []byte) ([]Case, error) {
	var cases []Case
	if path.Ext(file) == ".json" {
		var doc struct {
			Tests []json.RawMessage `json:"tests"`
		}
		if err := strictJSON(data, &doc); err != nil {
			return nil, &BundleError{File: file, Msg: "test table: " + err.Error()}
		}
		for i, raw := range doc.Tests {
			var c Case
			if err := strictJSON(raw, &c); err != nil {
				return nil, &BundleError{File: file, Msg: fmt.Sprintf("test %d: %v", i+1, err)}
			}
			cases = append(cases, c)
		}
	} else {
		var doc struct {
			Tests []yaml.Node `yaml:"tests"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, &BundleError{File: file, Msg: "test table: " + err.Error()}
		}
		for i := range doc.Tests {
			n := &doc.Tests[i]
			c, err := yamlCase(n)
			if err != nil {
				return nil, &BundleError{File: file, Line: n.Line, Msg: fmt.Sprintf("test %d: %v", i+1, err)}
			}
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return nil, &BundleError{File: file, Msg: "test table lists no tests"}
	}
	seen := make(map[string]bool, len(cases))
	for i, c := range cases {
		switch {
		case c.Name == "":
			return nil, &BundleError{File: file, Msg: fmt.Sprintf("test %d has no name", i+1)}
		case seen[c.Name]:
			return nil, &BundleError{File: file, Msg: fmt.Sprintf("test %q is listed twice", c.Name)}
		}
		seen[c.Name] = true
		if msg := c.Request.longList(); msg != "" {
			return nil, &BundleError{File: file, Msg: fmt.Sprintf("test %q: %s", c.Name, msg)}
		}
	}
	return cases, nil
}

// longList names a list of a test's request longer than MaxInputArray. In
// a served request the roles, groups, tags and sensitive pointers come
// from the deployment; in a test table from its writer, and an engine
// turns each into a set, so they are bounded as the open parts are.
func (r *Request) longList() string {
	type list struct {
		name string
		l    []string
	}
	lists := []list{{"principal.roles", r.Principal.Roles}, {"tool.tags", r.Tool.Tags}, {"tool.sensitive", r.Tool.Sensitive}}
	if r.User != nil {
		lists = append(lists, list{"user.roles", r.User.Roles}, list{"user.groups", r.User.Groups})
	}
	for _, l := range lists {
		if len(l.l) > MaxInputArray {
			return fmt.Sprintf("%s lists %d entries; a test's request may list at most %d", l.name, len(l.l), MaxInputArray)
		}
	}
	return ""
}

// yamlCase reads one case through its JSON form, so YAML and JSON tables
// read a Request exactly as the wire does (its json tags, RFC 3339 times).
func yamlCase(n *yaml.Node) (Case, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return Case{}, err
	}
	raw, err := json.Marshal(jsonable(v))
	if err != nil {
		return Case{}, err
	}
	var c Case
	if err := strictJSON(raw, &c); err != nil {
		return Case{}, err
	}
	return c, nil
}

// jsonable turns YAML's map[any]any nodes (non-string keys) into string-keyed
// maps encoding/json can write.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	}
	return v
}

// strictJSON refuses members the target does not have, so a misspelt
// field in a test fails the table instead of silently testing less.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the table")
	}
	return nil
}

// Check compares a decision with the case's expectation and says what
// differs; "" when the decision is the one expected.
func (c *Case) Check(d Decision) string {
	var diffs []string
	if d.Effect != c.Expect {
		diffs = append(diffs, fmt.Sprintf("decided %s (rule %q: %s), want %s", d.Effect, d.Rule, d.Reason, c.Expect))
	}
	if c.Rule != "" && d.Rule != c.Rule {
		diffs = append(diffs, fmt.Sprintf("rule %q, want %q", d.Rule, c.Rule))
	}
	if c.Reason != "" && d.Reason != c.Reason {
		diffs = append(diffs, fmt.Sprintf("reason %q, want %q", d.Reason, c.Reason))
	}
	if c.Approval != nil {
		want := c.Approval.normal()
		switch {
		case d.Approval == nil:
			diffs = append(diffs, fmt.Sprintf("no approval route, want %+v", want))
		case d.Approval.normal() != want:
			diffs = append(diffs, fmt.Sprintf("approval %+v, want %+v", d.Approval.normal(), want))
		}
	}
	return strings.Join(diffs, "; ")
}

// normal is the route with one approver written as 1, so 0 and 1 compare
// equal.
func (a *Approval) normal() Approval {
	n := *a
	if n.Approvers < 1 {
		n.Approvers = 1
	}
	return n
}

// Evaluator decides one request; Rules is one.
type Evaluator interface {
	Evaluate(ctx context.Context, r *Request) (Decision, error)
}

// RunCases decides every case and answers one result each. A fault
// deciding a case fails that case; it does not stop the others.
func RunCases(ctx context.Context, ev Evaluator, cases []Case) []TestResult {
	out := make([]TestResult, 0, len(cases))
	for i := range cases {
		c := &cases[i]
		d, err := ev.Evaluate(ctx, &c.Request)
		r := TestResult{Name: c.Name, Pass: true}
		switch {
		case err != nil:
			r.Pass, r.Message = false, fmt.Sprintf("fault: %v (want %s)", err, c.Expect)
		default:
			if msg := c.Check(d); msg != "" {
				r.Pass, r.Message = false, msg
			}
		}
		out = append(out, r)
	}
	return out
}
