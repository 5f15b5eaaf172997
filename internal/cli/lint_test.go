package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return code, o.String(), e.String()
}

func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/tools/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return files
}

func TestLintExamples(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(append([]string{"lint"}, examples(t)...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"payments.refund_order  (model-facing name: payments_refund_order",
		`"name": "payments_refund_order"`,
		`"destructiveHint": true`,
		`"toolplane/name": "crm.search_people"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !strings.Contains(errOut, "not checked (no deployment given): handler payments.refund_order") {
		t.Errorf("unresolved references not reported: %s", errOut)
	}
}

func TestLintResolvesAgainstADeployment(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("lint", "--handler", "email.send", "--fact", "recipient_is_new", "../../examples/tools/send_email.yaml")
	if code != 1 || !strings.Contains(errOut, "approval_preview") {
		t.Fatalf("a handler without a preview must fail approval_preview: exit %d %s", code, errOut)
	}
	code, _, errOut = run("lint", "--handler", "email.send+preview", "--fact", "recipient_is_new", "../../examples/tools/send_email.yaml")
	if code != 0 || strings.Contains(errOut, "not checked") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestLintFailsWithReasons(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	src := "name: crm.search_people\nversion: \"1\"\ndescription: x\nkind: internal\nbinding: {handler: {key: crm.x}}\neffect: write\nmax_output_bytes: 1\ninput_schema: {type: object}\noutput_schema: {type: object}\n"
	if err := os.WriteFile(bad, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("lint", bad)
	if code == 0 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"version", "repeatable", "max_output_bytes", "fix:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if code, _, _ := run("lint", filepath.Join(dir, "missing.yaml")); code == 0 {
		t.Error("a missing file passed")
	}
}

func TestLintArgs(t *testing.T) {
	t.Parallel()
	code, out, _ := run("lint", "--args", `{"order_id":" ord_9f8a7c2e1b3d ","amount_cents":1500,"reason":"Defective"}`, "../../examples/tools/refund_order.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var got struct {
		Arguments map[string]any `json:"arguments"`
		Coercions []struct{ FieldPath, Rule string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Arguments["order_id"] != "ord_9f8a7c2e1b3d" || got.Arguments["reason"] != "defective" || len(got.Coercions) != 2 {
		t.Fatalf("got %+v", got)
	}

	code, out, errOut := run("lint", "--args", `{"order_id":"x","amount_cents":15000000}`, "../../examples/tools/refund_order.yaml")
	if code != 1 || !strings.Contains(errOut, "invalid_input") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		OK    bool `json:"ok"`
		Error struct {
			Code, FieldPath string
			Retryable       bool
			Violations      []json.RawMessage
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.OK || res.Error.Code != "invalid_input" || !res.Error.Retryable || len(res.Error.Violations) != 3 {
		t.Fatalf("refusal = %s", out)
	}
}

func TestLintOutput(t *testing.T) {
	t.Parallel()
	rows := make([]map[string]any, 120)
	for i := range rows {
		rows[i] = map[string]any{"id": "p" + string(rune('a'+i%26)), "name": strings.Repeat("n", 20), "token": "secret-token"}
	}
	b, _ := json.Marshal(rows)
	code, out, errOut := run("lint", "--output", string(b), "../../examples/tools/search_people.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "secret-token") || !strings.Contains(out, `"truncated":true`) || !strings.Contains(out, `"count":50`) {
		t.Fatalf("bounded result = %s", out)
	}
	code, out, errOut = run("lint", "--output", `[{"name":"no id"}]`, "../../examples/tools/search_people.yaml")
	if code != 1 || !strings.Contains(out, "invalid_output") || !strings.Contains(errOut, "output violates its schema") {
		t.Fatalf("exit %d out %s err %s", code, out, errOut)
	}
}

func TestLintArgsNeedsOneTool(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(append([]string{"lint", "--args", "{}"}, examples(t)...)...)
	if code != 2 || !strings.Contains(errOut, "exactly one") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	if code, _, _ := run(); code != 2 {
		t.Error("no command should exit 2")
	}
	if code, _, errOut := run("frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Error("unknown command")
	}
	if code, out, _ := run("help"); code != 0 || !strings.Contains(out, "lint") {
		t.Error("help")
	}
}

// lint warns of a read tool whose answers hold free text while its output
// schema says of none of it whether it came from outside (a handler's
// answer is labelled untrusted only where its definition says so); a
// declaration, true or false, quiets it, a write is not asked, and the
// examples declare theirs. A warning does not fail the lint.
func TestLintWarnsOfUndeclaredOutsideText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, effect, subject string) string {
		t.Helper()
		d := `{"name":"help.` + name + `","version":"1.0.0","description":"Tickets.","kind":"internal",
			"binding":{"handler":{"key":"help.` + name + `"}},"effect":"` + effect + `",` + map[bool]string{true: `"repeatable":false,`}[effect != "read"] + `
			"input_schema":{"type":"object"},
			"output_schema":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string","maxLength":20},"status":{"type":"string","enum":["open","closed"]},"subject":` + subject + `}}}}`
		f := filepath.Join(dir, name+".json")
		if err := os.WriteFile(f, []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	const warning = "warning: output_schema: a read tool answering free text"
	tests := []struct {
		name, file string
		warned     bool
	}{
		{"a read answering undeclared free text", write("search", "read", `{"type":"string"}`), true},
		{"a read declaring it outside text", write("search_marked", "read", `{"type":"string","x-outside-text":true}`), false},
		{"a read declaring it its own", write("search_own", "read", `{"type":"string","x-outside-text":false}`), false},
		{"a write", write("close", "write", `{"type":"string"}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run("lint", tt.file)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(errOut, warning); got != tt.warned {
				t.Fatalf("warned = %v, want %v: %s", got, tt.warned, errOut)
			}
			if tt.warned && (!strings.Contains(errOut, "(/*/subject)") || strings.Contains(errOut, "/*/id") || strings.Contains(errOut, "/*/status")) {
				t.Fatalf("the warning should name the free-text field alone: %s", errOut)
			}
		})
	}
	// The examples that answer free text declare it: none is warned of.
	_, _, errOut := run(append([]string{"lint"}, examples(t)...)...)
	if strings.Contains(errOut, warning) {
		t.Errorf("an example declares no outside text: %s", errOut)
	}
}

// Lint refuses a tool whose retry budget cannot fit its timeout, naming
// the arithmetic (the seed's "full vendor retry budget fits inside the
// declared tool timeout"), and accepts the same tool with attempts that
// fit.
func TestLintRefusesARetryBudgetPastTheTimeout(t *testing.T) {
	t.Parallel()
	def := func(attempt string) string {
		return `name: payments.get_invoice
version: 1.0.0
description: Read one invoice.
kind: internal
binding: {handler: {key: payments.get_invoice}}
effect: read
retry: safe
timeout: 10s
execution: {max_attempts: 3, attempt_timeout: ` + attempt + `, backoff: 200ms}
input_schema: {type: object}
output_schema: {type: object}
`
	}
	dir := t.TempDir()
	tight, fits := filepath.Join(dir, "tight.yaml"), filepath.Join(dir, "fits.yaml")
	if err := os.WriteFile(tight, []byte(def("4s")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fits, []byte(def("3s")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run("lint", "--handler", "payments.get_invoice", tight)
	if code != 1 || !strings.Contains(errOut, "3 attempts × 4s + pauses up to 200ms + 400ms = 12.6s, more than the timeout of 10s") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := run("lint", "--handler", "payments.get_invoice", fits); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
