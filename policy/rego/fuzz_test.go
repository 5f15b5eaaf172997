package rego_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/rego"
)

// FuzzCompile feeds arbitrary module text and schema to Compile: it must
// answer rules or a *policy.BundleError, never panic, and rules it answers
// must decide a request (or fault) without panicking.
func FuzzCompile(f *testing.F) {
	for _, name := range []string{"refunds.rego", "data.rego", "operations.rego"} {
		b, err := os.ReadFile("../../examples/policy/rego/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "")
	}
	f.Add("package toolplane.authz\n\napproval contains {\"approvers\": 99}\n\nallow := true\n", `{"arguments": {"type": "object"}}`)
	f.Add("package toolplane.authz\n\nallow if input.arguments.x\n", `{"arguments": {"type": "object", "additionalProperties": false}}`)
	f.Add("package toolplane.authz\n\nallow if {", `{"facts": 3}`)
	req := request()
	f.Fuzz(func(t *testing.T, module, schema string) {
		files := map[string]string{"a.rego": module}
		if schema != "" {
			files[rego.SchemaFile] = schema
		}
		compiled, err := rego.Engine{Budget: 50 * time.Millisecond}.Compile(files)
		if err != nil {
			var be *policy.BundleError
			if !errors.As(err, &be) {
				t.Fatalf("Compile = %T %v, want a *policy.BundleError", err, err)
			}
			return
		}
		_, _ = compiled.Evaluate(context.Background(), req)
	})
}
