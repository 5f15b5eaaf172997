package policy_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolplane/toolplane/policy"
)

func TestIsCaseFile(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"tests.yaml": true, "tests.yml": true, "tests.json": true, "dir/refunds_tests.yaml": true,
		"tests.cedar": false, "mytests.yaml": false, "tests.yaml.bak": false, "schema.json": false,
	} {
		if got := policy.IsCaseFile(name); got != want {
			t.Errorf("IsCaseFile(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, table string
		n                 int    // cases read
		line              int    // the error's line
		msg               string // substring of the error; "" when none
	}{
		{
			name: "yaml with a merge", file: "tests.yaml", n: 2,
			table: "tests:\n  - name: a\n    request: &r {principal: {agent: x}, context: {hour: 9}}\n    expect: allow\n" +
				"  - name: b\n    request: {<<: *r, context: {hour: 20}}\n    expect: require_approval\n    approval: {group: g, approvers: 2}\n",
		},
		{
			name: "json", file: "tests.json", n: 1,
			table: `{"tests": [{"name": "a", "request": {"tool": {"name": "t"}}, "expect": "deny", "rule": "r"}]}`,
		},
		{
			name: "a misspelt member", file: "tests.yaml", line: 2, msg: "expcet",
			table: "tests:\n  - name: a\n    expcet: allow\n",
		},
		{
			name: "an unknown effect", file: "tests.yaml", line: 2, msg: "permit",
			table: "tests:\n  - name: a\n    expect: permit\n",
		},
		{
			name: "a case with no name", file: "tests.yaml", msg: "no name",
			table: "tests:\n  - expect: allow\n",
		},
		{
			name: "a name used twice", file: "tests.json", msg: "twice",
			table: `{"tests": [{"name": "a", "expect": "deny"}, {"name": "a", "expect": "allow"}]}`,
		},
		{
			name: "no tests", file: "tests.yaml", msg: "no tests",
			table: "tests: []\n",
		},
		{
			name: "not yaml", file: "tests.yaml", msg: "test table",
			table: "tests: [\n",
		},
		{
			name: "a list longer than a request may hold", file: "tests.json", msg: "user.groups lists 1001 entries",
			table: `{"tests": [{"name": "a", "expect": "deny", "request": {"user": {"id": "u", "groups": [` +
				strings.Repeat(`"g",`, 1000) + `"g"]}}}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cases, err := policy.ParseCases(tt.file, []byte(tt.table))
			if tt.msg == "" {
				if err != nil || len(cases) != tt.n {
					t.Fatalf("ParseCases = %d cases, %v; want %d", len(cases), err, tt.n)
				}
				return
			}
			var be *policy.BundleError
			if !errors.As(err, &be) || be.File != tt.file || be.Line != tt.line || !strings.Contains(be.Msg, tt.msg) {
				t.Errorf("ParseCases = %v, want a BundleError at %s:%d containing %q", err, tt.file, tt.line, tt.msg)
			}
		})
	}
}

func TestParseCasesMerge(t *testing.T) {
	t.Parallel()
	cases, err := policy.ParseCases("tests.yaml", []byte("tests:\n  - name: a\n    request: &r {principal: {agent: x}, context: {hour: 9}}\n    expect: allow\n"+
		"  - name: b\n    request: {<<: *r, context: {hour: 20}}\n    expect: deny\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b := cases[1].Request; b.Principal.Agent != "x" || b.Context.Hour != 20 {
		t.Errorf("the merged request is %+v, want agent x at hour 20", b)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	c := policy.Case{Expect: policy.RequireApproval, Rule: "r", Approval: &policy.Approval{Group: "g"}}
	tests := []struct {
		d    policy.Decision
		want string // substring; "" for a match
	}{
		{policy.Decision{Effect: policy.RequireApproval, Rule: "r", Approval: &policy.Approval{Group: "g", Approvers: 1}}, ""},
		{policy.Decision{Effect: policy.Allow, Rule: "r"}, "want require_approval"},
		{policy.Decision{Effect: policy.RequireApproval, Rule: "q", Approval: &policy.Approval{Group: "g"}}, `want "r"`},
		{policy.Decision{Effect: policy.RequireApproval, Rule: "r"}, "no approval route"},
		{policy.Decision{Effect: policy.RequireApproval, Rule: "r", Approval: &policy.Approval{Group: "g", Manager: true}}, "approval"},
	}
	for _, tt := range tests {
		got := c.Check(tt.d)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("Check(%+v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestReadBundle(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"a.cedar":        {Data: []byte("permit (principal, action, resource);")},
		"sub/tests.yaml": {Data: []byte("tests: []")},
		".git/config":    {Data: []byte("x")},
		".hidden.cedar":  {Data: []byte("x")},
		"big/huge.cedar": {Data: make([]byte, 1<<20+1)},
	}
	_, err := policy.ReadBundle(fsys)
	var be *policy.BundleError
	if !errors.As(err, &be) || be.File != "big/huge.cedar" {
		t.Fatalf("ReadBundle with a file over 1 MiB = %v, want a BundleError naming it", err)
	}
	delete(fsys, "big/huge.cedar")
	files, err := policy.ReadBundle(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files["a.cedar"] == "" || files["sub/tests.yaml"] != "tests: []" {
		t.Errorf("ReadBundle = %v, want a.cedar and sub/tests.yaml only", files)
	}
}

func TestEffectText(t *testing.T) {
	t.Parallel()
	for _, e := range []policy.Effect{policy.Deny, policy.Allow, policy.RequireApproval} {
		b, err := e.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back policy.Effect
		if err := back.UnmarshalText(b); err != nil || back != e {
			t.Errorf("%v round-trips to %v, %v", e, back, err)
		}
	}
	if _, err := policy.Effect(7).MarshalText(); err == nil {
		t.Error("Effect(7) has a text form")
	}
}
