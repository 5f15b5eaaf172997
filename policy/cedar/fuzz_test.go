package cedar_test

import (
	"context"
	"os"
	"testing"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
)

// FuzzCompile feeds arbitrary policy text and schema to Compile: it must
// answer rules or a *policy.BundleError, never panic, and rules it answers
// must decide a request without panicking.
func FuzzCompile(f *testing.F) {
	for _, name := range []string{"refunds.cedar", "data.cedar", "operations.cedar"} {
		b, err := os.ReadFile("../../examples/policy/cedar/" + name)
		if err != nil {
			f.Fatal(err)
		}
		schema, err := os.ReadFile("../../examples/policy/cedar/schema.cedarschema")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), string(schema))
	}
	f.Add(`@approval("x") @approvers("99") forbid (principal, action, resource);`, "")
	f.Add(`permit (principal, action, resource) when { context.arguments.a.b.c };`, `type Arguments = { a: { b: { c: Bool } } };`)
	f.Add(`permit (principal, action, resource`, `entity X;`)
	req := request()
	f.Fuzz(func(t *testing.T, rules, schema string) {
		files := map[string]string{"a.cedar": rules}
		if schema != "" {
			files[cedar.SchemaFile] = schema
		}
		compiled, err := cedar.Engine{}.Compile(files)
		if err != nil {
			if _, ok := err.(*policy.BundleError); !ok {
				t.Fatalf("Compile = %T %v, want a *policy.BundleError", err, err)
			}
			return
		}
		_, _ = compiled.Evaluate(context.Background(), req)
	})
}
