package toolfile

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

func TestExamplesLoadAndPass(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../examples/tools/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var defs []toolplane.Definition
	for _, f := range files {
		d, _, err := ReadFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		defs = append(defs, d)
	}
	if _, err := registry.Check(defs, registry.Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestSeedFormMapsOntoDefinition(t *testing.T) {
	t.Parallel()
	d, notes, err := ReadFile("../examples/tools/refund_order.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"name joins namespace and name", d.Name == "payments.refund_order"},
		{"version", d.Version == "2.1.0"},
		{"read_only false is a write", d.Effect == toolplane.EffectWrite},
		{"a write states repeatable false", d.Repeatable != nil && !*d.Repeatable},
		{"annotations carried", d.Annotations.Destructive && d.Annotations.Idempotent && d.Annotations.RequiresApproval && !d.Annotations.LongRunning},
		{"retry of an idempotent write is replay", d.Replay != nil && d.Replay.MaxAttempts == 3 && d.Retry == ""},
		{"timeout_ms", d.Timeout.Std() == 3*time.Second},
		{"credential becomes the connection", d.Connection == "payments"},
		{"bound to the handler named like the tool", d.Binding.Handler != nil && d.Binding.Handler.Key == "payments.refund_order"},
		{"metadata", d.Owner == "payments-platform" && d.CostCenter == "CC-1001" && d.OnCall != "" && len(d.Tags) == 3},
		{"mode", d.Mode == toolplane.ModeSync},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: %+v", c.what, d)
		}
	}
	if len(notes) != 0 {
		t.Errorf("unexpected notes: %v", notes)
	}
}

// TestSeedRefundOrderExampleLoads loads the refund_order tool.yaml example of
// the design documents, unchanged, when they are beside the checkout.
func TestSeedRefundOrderExampleLoads(t *testing.T) {
	t.Parallel()
	matches, _ := filepath.Glob("../../shared/seeds/003_*.txt")
	if len(matches) == 0 {
		t.Skip("design documents not beside this checkout (../shared/seeds); nothing to load")
	}
	text, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)# tool\.yaml[^\n]*\n(apiVersion:.*?\nversion: [0-9.]+)\n`).FindSubmatch(text)
	if block == nil {
		t.Fatal("the tool.yaml example was not found in the design document")
	}
	d, notes, err := Parse(block[1], ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "payments.refund_order" || d.Replay == nil || d.Connection != "payments-service-token" {
		t.Fatalf("mapped = %+v", d)
	}
	fields := map[string]bool{}
	for _, n := range notes {
		fields[n.Field] = true
	}
	for _, f := range []string{"spec.execution.target", "spec.execution.resource_limits", "spec.credentials", "spec.execution.retry"} {
		if !fields[f] {
			t.Errorf("no note for %s: %v", f, notes)
		}
	}
	if _, err := registry.Check([]toolplane.Definition{d}, registry.Options{}); err != nil {
		t.Fatalf("the example does not pass the registration checks: %v", err)
	}
}

func TestParseRefusesBadFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ext, src, want string
	}{
		{"unknown field", ".yaml", "name: a.b\nannotatons: {destructive: true}\n", "annotatons"},
		{"unknown seed field", ".yaml", "apiVersion: toolplatform/v1\nkind: Tool\nmetadata: {name: a, namespace: b, owner: x}\n", "owner"},
		{"wrong seed kind", ".yaml", "apiVersion: toolplatform/v1\nkind: Agent\n", "kind: Tool"},
		{"other apiVersion", ".yaml", "apiVersion: v2\n", "apiVersion"},
		{"wrong type", ".json", `{"name": 5}`, "name"},
		{"two documents", ".yaml", "name: a.b\n---\nname: c.d\n", "one definition"},
		{"not an object", ".yaml", "- a\n- b\n", "object"},
		{"empty", ".yaml", "", "empty"},
		{"invalid JSON", ".json", `{"name": `, "invalid JSON"},
		{"invalid YAML", ".yaml", "name: [a\n", "invalid YAML"},
		{"bad duration", ".yaml", "timeout: soon\n", "duration"},
		{"two credentials", ".yaml", "apiVersion: toolplatform/v1\nkind: Tool\nspec:\n  credentials: [{name: a}, {name: b}]\n", "at most one"},
		{"duplicate YAML key", ".yaml", "name: a.b\nname: c.d\n", "already defined"},
		{"trailing JSON", ".json", `{"name":"a.b"} {}`, "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Parse([]byte(tt.src), tt.ext)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrFormat mentioning %q", err, tt.want)
			}
		})
	}
}

func TestYAMLKeepsYesNoAsStrings(t *testing.T) {
	t.Parallel()
	d, _, err := Parse([]byte("name: a.b\ninput_schema: {type: object, properties: {answer: {enum: [yes, no, on]}}}\n"), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d.InputSchema), `["yes","no","on"]`) {
		t.Fatalf("enum changed: %s", d.InputSchema)
	}
}

func TestJSONAndYAMLFormsAgree(t *testing.T) {
	t.Parallel()
	y, _, err := Parse([]byte("name: a.b\nversion: 1.0.0\ntimeout: 1500\nrepeatable: false\nmax_results: 3\n"), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := Parse([]byte(`{"name":"a.b","version":"1.0.0","timeout":"1.5s","repeatable":false,"max_results":3}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if y.Name != j.Name || y.Timeout != j.Timeout || *y.Repeatable != *j.Repeatable || y.MaxResults != j.MaxResults {
		t.Fatalf("yaml %+v\njson %+v", y, j)
	}
}

func TestSeedRuntimeBindsTheTarget(t *testing.T) {
	t.Parallel()
	const head = "apiVersion: toolplatform/v1\nkind: Tool\nmetadata: {name: get_order, namespace: shop}\nversion: 1.0.0\nspec:\n  credentials: [{name: shop}]\n"
	tests := []struct {
		name, exec string
		check      func(d toolplane.Definition) bool
		note       bool
	}{
		{"http read", "  annotations: {read_only: true}\n  execution: {runtime: http, target: {method: GET, url: 'https://shop.example/orders/{id}'}}\n",
			func(d toolplane.Definition) bool {
				return d.Binding.HTTP != nil && d.Binding.HTTP.URL == "https://shop.example/orders/{id}" && d.Binding.HTTP.IdempotencyHeader == "" && d.Binding.Handler == nil
			}, false},
		{"idempotent http write sends the key", "  annotations: {idempotent: true}\n  execution: {runtime: http, target: {method: POST, url: 'https://shop.example/refunds'}}\n",
			func(d toolplane.Definition) bool {
				return d.Binding.HTTP != nil && d.Binding.HTTP.IdempotencyHeader == "Idempotency-Key"
			}, true},
		{"named idempotency header kept", "  annotations: {idempotent: true}\n  execution: {runtime: http, target: {method: POST, url: 'https://shop.example/r', idempotency_header: X-Request-Id}}\n",
			func(d toolplane.Definition) bool { return d.Binding.HTTP.IdempotencyHeader == "X-Request-Id" }, false},
		{"sql", "  annotations: {read_only: true}\n  execution: {runtime: sql, target: {statement: 'SELECT 1 WHERE :id = 1', max_rows: 5}}\n",
			func(d toolplane.Definition) bool {
				return d.Binding.SQL != nil && d.Binding.SQL.MaxRows == 5 && d.Binding.Handler == nil
			}, false},
		{"other runtime stays a handler", "  execution: {runtime: code_exec, target: {image: x}}\n",
			func(d toolplane.Definition) bool {
				return d.Binding.Handler != nil && d.Binding.Handler.Key == "shop.get_order"
			}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, notes, err := Parse([]byte(head+tt.exec), ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(d) {
				t.Fatalf("binding = %+v", d.Binding)
			}
			noted := false
			for _, n := range notes {
				noted = noted || n.Field == "spec.execution.target"
			}
			if noted != tt.note {
				t.Fatalf("notes = %v, want a target note: %v", notes, tt.note)
			}
		})
	}
	for _, bad := range []string{
		"  execution: {runtime: http}\n",
		"  execution: {runtime: http, target: {method: GET, url: 'https://a.example', script: x}}\n",
		"  execution: {runtime: sql, target: {query: 'SELECT 1'}}\n",
	} {
		if _, _, err := Parse([]byte(head+bad), ".yaml"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "spec.execution.target") {
			t.Errorf("%q: err = %v, want ErrFormat naming the target", bad, err)
		}
	}
}

// A read's retry in the toolplatform/v1 form becomes its attempts inside
// the timeout: retry: safe, execution.max_attempts, and the base delay as
// the first pause's ceiling.
func TestSeedReadRetryMapsOntoAttempts(t *testing.T) {
	t.Parallel()
	doc := `apiVersion: toolplatform/v1
kind: Tool
metadata: {namespace: crm, name: get_person}
version: 1.0.0
spec:
  description: Read one person.
  annotations: {read_only: true}
  execution:
    timeout_ms: 2000
    retry: {max_attempts: 4, backoff: exponential, base_delay_ms: 150}
  input_schema: {type: object}
  output_schema: {type: object}
`
	d, notes, err := Parse([]byte(doc), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Retry != toolplane.RetrySafe || d.Execution == nil || d.Execution.MaxAttempts != 4 || d.Execution.Backoff.Std() != 150*time.Millisecond {
		t.Fatalf("retry %q, execution %+v", d.Retry, d.Execution)
	}
	if len(notes) != 0 {
		t.Errorf("unexpected notes: %v", notes)
	}
}
