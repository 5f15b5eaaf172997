// Package policytest is the conformance table every rule engine passes:
// one table of requests and the decisions they must get, two equivalent
// bundles (Cedar and Rego) that must give exactly those decisions, and the
// bundles each engine must refuse to compile. An engine's tests call Run;
// any other package can read the same table and bundles to drive its own.
// Every hand-written mapping of policy.Request (the Rego input, the Cedar
// request, the decision record) runs MapsEveryField, so a field added to
// Request and not mapped fails each of their tests.
package policytest

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
)

//go:embed testdata
var testdata embed.FS

// TableFile is the conformance table's name inside each bundle.
const TableFile = "conformance_tests.yaml"

// Cases answers the conformance table.
func Cases() ([]policy.Case, error) {
	b, err := testdata.ReadFile("testdata/" + TableFile)
	if err != nil {
		return nil, err
	}
	return policy.ParseCases(TableFile, b)
}

// Bundle answers the conformance bundle written in a language ("cedar" or
// "rego"), its table among its files as its own tests.
func Bundle(language string) (map[string]string, error) {
	sub, err := fs.Sub(testdata, "testdata/"+language)
	if err != nil {
		return nil, err
	}
	files, err := policy.ReadBundle(sub)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("policytest: no conformance bundle in %s", language)
	}
	table, err := testdata.ReadFile("testdata/" + TableFile)
	if err != nil {
		return nil, err
	}
	files[TableFile] = string(table)
	return files, nil
}

// Refusals answers, by case name, the bundles an engine of the language
// must refuse: the conformance bundle plus one rule reading an attribute
// the Request (or the bundle's schema) does not have.
func Refusals(language string) (map[string]map[string]string, error) {
	dir := "testdata/refuse/" + language
	entries, err := testdata.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, e := range entries {
		b, err := testdata.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		files, err := Bundle(language)
		if err != nil {
			return nil, err
		}
		files["refused"+path.Ext(e.Name())] = string(b)
		out[strings.TrimSuffix(e.Name(), path.Ext(e.Name()))] = files
	}
	return out, nil
}

// Run runs the conformance table against an engine: its bundle compiles,
// every case gets the decision written, the bundle's own tests pass, every
// refusal is refused with a *policy.BundleError, and a spent budget is the
// fault policy.ErrBudget, never a decision.
func Run(t *testing.T, e policy.Engine) {
	t.Helper()
	cases, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("the conformance table has %d cases, want 40 or more", len(cases))
	}
	files, err := Bundle(e.Language())
	if err != nil {
		t.Fatal(err)
	}
	rules, err := e.Compile(files)
	if err != nil {
		t.Fatalf("the conformance bundle does not compile: %v", err)
	}
	ctx := context.Background()
	t.Run("decisions", func(t *testing.T) {
		for i := range cases {
			c := &cases[i]
			// Sequential: the decisions take microseconds, and a hundred
			// goroutines on a shared machine would measure the scheduler
			// against the engine's time budget.
			t.Run(c.Name, func(t *testing.T) {
				d, err := rules.Evaluate(ctx, &c.Request)
				if err != nil {
					t.Fatalf("fault: %v", err)
				}
				if msg := c.Check(d); msg != "" {
					t.Error(msg)
				}
			})
		}
	})
	t.Run("bundle tests", func(t *testing.T) {
		t.Parallel()
		results, err := rules.Test(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) < len(cases) {
			t.Errorf("the bundle ran %d tests, want at least its table's %d", len(results), len(cases))
		}
		for _, r := range results {
			if !r.Pass {
				t.Errorf("%s: %s", r.Name, r.Message)
			}
		}
	})
	t.Run("refusals", func(t *testing.T) {
		refusals, err := Refusals(e.Language())
		if err != nil {
			t.Fatal(err)
		}
		if len(refusals) == 0 {
			t.Fatal("no refusals for the language")
		}
		for name, files := range refusals {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				_, err := e.Compile(files)
				var be *policy.BundleError
				if !errors.As(err, &be) {
					t.Fatalf("Compile = %v, want a *policy.BundleError", err)
				}
				if !strings.HasPrefix(be.File, "refused.") {
					t.Errorf("Compile = %v, want the error at the refused rule's file", err)
				}
			})
		}
	})
	t.Run("spent budget", func(t *testing.T) {
		t.Parallel()
		spent, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
		defer cancel()
		d, err := rules.Evaluate(spent, &cases[0].Request)
		if !errors.Is(err, policy.ErrBudget) {
			t.Errorf("Evaluate with a spent budget = %+v, %v; want policy.ErrBudget", d, err)
		}
	})
}

// Same compares the decisions two compiled bundles give every case of the
// table and answers the names of the cases they decide differently, with
// both decisions: the check that two engines are interchangeable.
func Same(ctx context.Context, a, b policy.Rules) ([]string, error) {
	cases, err := Cases()
	if err != nil {
		return nil, err
	}
	var diffs []string
	for i := range cases {
		c := &cases[i]
		da, errA := a.Evaluate(ctx, &c.Request)
		db, errB := b.Evaluate(ctx, &c.Request)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, errors.Join(errA, errB))
		}
		if !reflect.DeepEqual(normal(da), normal(db)) {
			diffs = append(diffs, fmt.Sprintf("%s: %+v / %+v", c.Name, da, db))
		}
	}
	slices.Sort(diffs)
	return diffs, nil
}

// normal writes an approval route's one approver as 1, as Case.Check does.
func normal(d policy.Decision) policy.Decision {
	if d.Approval != nil {
		a := *d.Approval
		a.Approvers = max(a.Approvers, 1)
		d.Approval = &a
	}
	return d
}
