package registry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// base answers a definition that passes every check; each test case breaks
// one rule of it.
func base() toolplane.Definition {
	no := false
	return toolplane.Definition{
		Name:         "crm.update_company",
		Version:      "1.0.0",
		Description:  "Change fields of one company.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["company_id"],"properties":{"company_id":{"type":"string"},"ids":{"type":"array","items":{"type":"string"}},"filter":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`),
		Kind:         toolplane.KindInternal,
		Binding:      toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "crm.update_company"}},
		Effect:       toolplane.EffectWrite,
		Repeatable:   &no,
	}
}

func readDef() toolplane.Definition {
	d := base()
	d.Name, d.Effect, d.Repeatable = "crm.search_people", toolplane.EffectRead, nil
	d.Binding.Handler.Key = "crm.search_people"
	d.OutputSchema = json.RawMessage(`{"type":"array","items":{"type":"object"}}`)
	return d
}

var deployment = Static{
	Handlers:      map[string]bool{"crm.update_company": false, "crm.search_people": false, "email.send": true},
	Connections:   map[string]bool{"conn-1": true},
	FactResolvers: map[string]bool{"recipient_is_new": true},
}

func problems(t *testing.T, defs []toolplane.Definition, opt Options) []Problem {
	t.Helper()
	_, err := Check(defs, opt)
	if err == nil {
		return nil
	}
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, want *CheckError: %v", err, err)
	}
	return ce.Problems
}

func TestRegistrationChecks(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	tests := []struct {
		name  string
		def   func() toolplane.Definition
		field string // "" for a definition that must pass
	}{
		{"a valid write passes", base, ""},
		{"a valid read passes", readDef, ""},
		{"name missing", func() toolplane.Definition { d := base(); d.Name = ""; return d }, "name"},
		{"name without namespace", func() toolplane.Definition { d := base(); d.Name = "update"; return d }, "name"},
		{"name with two dots", func() toolplane.Definition { d := base(); d.Name = "a.b.c"; return d }, "name"},
		{"name in upper case", func() toolplane.Definition { d := base(); d.Name = "CRM.update"; return d }, "name"},
		{"mcp prefix reserved for ingested tools", func() toolplane.Definition { d := base(); d.Name = "mcp.update"; return d }, "name"},
		{"mcp tool name must carry its remote name", func() toolplane.Definition {
			d := base()
			d.Name, d.Kind = "mcp.github.create_issue", toolplane.KindMCP
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: "open_issue"}}
			return d
		}, "name"},
		{"a valid mcp tool passes", func() toolplane.Definition {
			d := base()
			d.Name, d.Kind = "mcp.github.create-issue.v2", toolplane.KindMCP
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: "create-issue.v2"}}
			return d
		}, ""},
		{"description missing", func() toolplane.Definition { d := base(); d.Description = " "; return d }, "description"},
		{"version missing", func() toolplane.Definition { d := base(); d.Version = ""; return d }, "version"},
		{"version not semver", func() toolplane.Definition { d := base(); d.Version = "v1"; return d }, "version"},
		{"version too large to order", func() toolplane.Definition { d := base(); d.Version = "18446744073709551616.0.0"; return d }, "version"},
		{"input schema missing", func() toolplane.Definition { d := base(); d.InputSchema = nil; return d }, "input_schema"},
		{"input schema invalid", func() toolplane.Definition {
			d := base()
			d.InputSchema = json.RawMessage(`{"type":"objekt"}`)
			return d
		}, "input_schema"},
		{"input schema root not an object", func() toolplane.Definition {
			d := base()
			d.InputSchema = json.RawMessage(`{"type":"string"}`)
			return d
		}, "input_schema"},
		{"input schema remote ref", func() toolplane.Definition {
			d := base()
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`)
			return d
		}, "input_schema"},
		{"output schema missing", func() toolplane.Definition { d := base(); d.OutputSchema = nil; return d }, "output_schema"},
		{"error schema invalid", func() toolplane.Definition {
			d := base()
			d.ErrorSchema = json.RawMessage(`{"required":"x"}`)
			return d
		}, "error_schema"},
		{"schema hash stated wrong", func() toolplane.Definition { d := base(); d.SchemaHash = "sha256:00"; return d }, "schema_hash"},
		{"kind missing", func() toolplane.Definition { d := base(); d.Kind = ""; return d }, "kind"},
		{"kind unknown", func() toolplane.Definition { d := base(); d.Kind = "script"; return d }, "kind"},
		{"binding missing", func() toolplane.Definition { d := base(); d.Binding = toolplane.Binding{}; return d }, "binding"},
		{"binding both sides", func() toolplane.Definition {
			d := base()
			d.Binding.Remote = &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: "x"}
			return d
		}, "binding"},
		{"handler does not resolve", func() toolplane.Definition { d := base(); d.Binding.Handler.Key = "crm.nothing"; return d }, "binding.handler.key"},
		{"remote connection does not resolve", func() toolplane.Definition {
			d := base()
			d.Name, d.Kind = "mcp.gh.x", toolplane.KindMCP
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-9", RemoteName: "x"}}
			return d
		}, "binding.remote.connection_id"},
		{"internal tool bound remotely", func() toolplane.Definition {
			d := base()
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: "x"}}
			return d
		}, "binding"},
		{"approval preview without a preview", func() toolplane.Definition { d := base(); d.ApprovalPreview = true; return d }, "approval_preview"},
		{"effect missing", func() toolplane.Definition { d := base(); d.Effect = ""; return d }, "effect"},
		{"effect unknown", func() toolplane.Definition { d := base(); d.Effect = "delete"; return d }, "effect"},
		{"send without a connection", func() toolplane.Definition { d := base(); d.Effect = toolplane.EffectSend; return d }, "connection"},
		{"write without repeatable", func() toolplane.Definition { d := base(); d.Repeatable = nil; return d }, "repeatable"},
		{"write with repeatable true", func() toolplane.Definition { d := base(); d.Repeatable = &yes; return d }, "repeatable"},
		{"read stating repeatable", func() toolplane.Definition { d := readDef(); d.Repeatable = &no; return d }, "repeatable"},
		{"destructive read", func() toolplane.Definition { d := readDef(); d.Annotations.Destructive = true; return d }, "annotations.destructive"},
		{"retry safe on a write", func() toolplane.Definition { d := base(); d.Retry = toolplane.RetrySafe; return d }, "retry"},
		{"retry unknown", func() toolplane.Definition { d := readDef(); d.Retry = "always"; return d }, "retry"},
		{"replay on a write that is not idempotent", func() toolplane.Definition { d := base(); d.Replay = &toolplane.Replay{MaxAttempts: 3}; return d }, "replay"},
		{"replay attempts out of range", func() toolplane.Definition {
			d := base()
			d.Annotations.Idempotent = true
			d.Replay = &toolplane.Replay{MaxAttempts: 101}
			return d
		}, "replay.max_attempts"},
		{"one-byte output limit", func() toolplane.Definition { d := base(); d.MaxOutputBytes = 1; return d }, "max_output_bytes"},
		{"output limit above the platform", func() toolplane.Definition { d := base(); d.MaxOutputBytes = 40000; return d }, "max_output_bytes"},
		{"negative max_results", func() toolplane.Definition { d := readDef(); d.MaxResults = -1; return d }, "max_results"},
		{"max_results above the platform", func() toolplane.Definition { d := readDef(); d.MaxResults = 20000; return d }, "max_results"},
		{"max_results on an object output", func() toolplane.Definition { d := base(); d.MaxResults = 5; return d }, "max_results"},
		{"batch size without argument", func() toolplane.Definition { d := base(); d.MaxBatchSize = 5; return d }, "batch_argument"},
		{"batch argument without size", func() toolplane.Definition { d := base(); d.BatchArgument = "ids"; return d }, "max_batch_size"},
		{"batch argument not top-level", func() toolplane.Definition { d := base(); d.BatchArgument, d.MaxBatchSize = "missing", 5; return d }, "batch_argument"},
		{"batch argument not an array", func() toolplane.Definition { d := base(); d.BatchArgument, d.MaxBatchSize = "filter", 5; return d }, "batch_argument"},
		{"batch size above the platform", func() toolplane.Definition { d := base(); d.BatchArgument, d.MaxBatchSize = "ids", 5000; return d }, "max_batch_size"},
		{"reserved policy fact", func() toolplane.Definition { d := base(); d.PolicyFacts = []string{"principal"}; return d }, "policy_facts.principal"},
		{"policy fact without resolver", func() toolplane.Definition { d := base(); d.PolicyFacts = []string{"is_vip"}; return d }, "policy_facts.is_vip"},
		{"policy fact listed twice", func() toolplane.Definition {
			d := base()
			d.PolicyFacts = []string{"recipient_is_new", "recipient_is_new"}
			return d
		}, "policy_facts.recipient_is_new"},
		{"long running requires async", func() toolplane.Definition { d := base(); d.Annotations.LongRunning = true; return d }, "mode"},
		{"mode unknown", func() toolplane.Definition { d := base(); d.Mode = "batch"; return d }, "mode"},
		{"timeout over the sync step budget", func() toolplane.Definition { d := base(); d.Timeout = toolplane.Duration(10 * time.Minute); return d }, "timeout"},
		{"timeout negative", func() toolplane.Definition { d := base(); d.Timeout = toolplane.Duration(-time.Second); return d }, "timeout"},
		{"async timeout within its budget", func() toolplane.Definition {
			d := base()
			d.Mode, d.Annotations.LongRunning, d.Timeout = toolplane.ModeAsync, true, toolplane.Duration(time.Hour)
			return d
		}, ""},
		{"item kind malformed", func() toolplane.Definition { d := readDef(); d.ItemKind = "Person!"; return d }, "item_kind"},
		{"escalation without a next group", func() toolplane.Definition {
			d := base()
			d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"leads"}, OnTimeout: toolplane.OnTimeoutEscalate}
			return d
		}, "approval.chain"},
		{"unknown default on timeout", func() toolplane.Definition {
			d := base()
			d.Approval = &toolplane.ApprovalPolicy{OnTimeout: "approve"}
			return d
		}, "approval.on_timeout"},
		{"approval group listed twice", func() toolplane.Definition {
			d := base()
			d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"leads", "leads"}, OnTimeout: toolplane.OnTimeoutEscalate}
			return d
		}, "approval.chain"},
		{"approval wait too short", func() toolplane.Definition {
			d := base()
			d.Approval = &toolplane.ApprovalPolicy{TTL: toolplane.Duration(time.Second)}
			return d
		}, "approval.ttl"},
		{"an escalation chain passes", func() toolplane.Definition {
			d := base()
			d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"leads", "directors"}, OnTimeout: toolplane.OnTimeoutEscalate, TTL: toolplane.Duration(time.Hour)}
			return d
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := problems(t, []toolplane.Definition{tt.def()}, Options{Bindings: deployment})
			if tt.field == "" {
				if len(ps) > 0 {
					t.Fatalf("unexpected problems: %v", ps)
				}
				return
			}
			for _, p := range ps {
				if p.Field == tt.field {
					if p.Message == "" || p.Fix == "" {
						t.Errorf("problem lacks a message or a fix: %+v", p)
					}
					return
				}
			}
			t.Fatalf("no problem on field %q; got %v", tt.field, ps)
		})
	}
}

func TestBatchArgumentAndSizeMustAppearTogether(t *testing.T) {
	t.Parallel()
	d := base()
	d.MaxBatchSize = 10
	if ps := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment}); len(ps) != 1 || ps[0].Field != "batch_argument" {
		t.Fatalf("problems = %v", ps)
	}
	d = base()
	d.BatchArgument = "filter"
	d.MaxBatchSize = 10
	if ps := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment}); len(ps) != 1 || !strings.Contains(ps[0].Message, "array") {
		t.Fatalf("a non-array batch argument must be refused: %v", ps)
	}
}

func TestOneByteOutputLimitDoesNotBuild(t *testing.T) {
	t.Parallel()
	d := base()
	d.MaxOutputBytes = 1
	if _, _, err := Build([]toolplane.Definition{d}, Options{Bindings: deployment}); err == nil {
		t.Fatal("a one-byte output limit built")
	}
	d.MaxOutputBytes = 2
	if _, _, err := Build([]toolplane.Definition{d}, Options{Bindings: deployment}); err != nil {
		t.Fatalf("a two-byte output limit was refused: %v", err)
	}
}

func TestRepeatableTrueCannotRegister(t *testing.T) {
	t.Parallel()
	yes := true
	for _, effect := range []toolplane.Effect{toolplane.EffectWrite, toolplane.EffectSend} {
		d := base()
		d.Effect, d.Repeatable, d.Connection = effect, &yes, "mailbox"
		ps := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment})
		if len(ps) != 1 || ps[0].Field != "repeatable" {
			t.Errorf("%s tool with repeatable true: problems = %v", effect, ps)
		}
	}
}

func TestTwoContractsDerivingOneNameAreRefused(t *testing.T) {
	t.Parallel()
	a, b := base(), base()
	a.Name, b.Name = "crm.search_people", "crm_search.people"
	ps := problems(t, []toolplane.Definition{a, b}, Options{Bindings: deployment})
	if len(ps) != 1 || ps[0].Field != "name" || !strings.Contains(ps[0].Message, "crm_search_people") {
		t.Fatalf("problems = %v", ps)
	}
	// A collision with a tool already in the catalogue is refused too.
	ps = problems(t, []toolplane.Definition{b}, Options{Bindings: deployment, Registered: []string{"crm.search_people"}})
	if len(ps) != 1 || ps[0].Field != "name" {
		t.Fatalf("collision with the catalogue: problems = %v", ps)
	}
}

func TestDerivedNameOver64IsRefused(t *testing.T) {
	t.Parallel()
	d := base()
	d.Name, d.Kind = "mcp.a-long-connection-slug."+strings.Repeat("r", 40), toolplane.KindMCP
	d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: strings.Repeat("r", 40)}}
	ps := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment})
	if len(ps) != 1 || ps[0].Field != "name" || !strings.Contains(ps[0].Message, "64") {
		t.Fatalf("problems = %v", ps)
	}
}

func TestDuplicatePlatformNameIsRefusedNotShadowed(t *testing.T) {
	t.Parallel()
	ps := problems(t, []toolplane.Definition{base(), base()}, Options{Bindings: deployment})
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "already registered") {
		t.Fatalf("problems = %v", ps)
	}
}

func TestOfflineCheckListsUnresolvedReferences(t *testing.T) {
	t.Parallel()
	d := base()
	d.PolicyFacts = []string{"recipient_is_new"}
	rep, err := Check([]toolplane.Definition{d}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fact recipient_is_new", "handler crm.update_company"}
	if strings.Join(rep.Unresolved, "|") != strings.Join(want, "|") {
		t.Fatalf("unresolved = %v, want %v", rep.Unresolved, want)
	}
}

func TestSchemaHashIsCanonical(t *testing.T) {
	t.Parallel()
	a, b := base(), base()
	b.InputSchema = json.RawMessage(`{ "properties": {"filter":{"type":"string"}, "ids":{"items":{"type":"string"},"type":"array"}, "company_id":{"type":"string"}}, "required":["company_id"], "type":"object" }`)
	ha, err := SchemaHash(&a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := SchemaHash(&b)
	if ha != hb || !strings.HasPrefix(ha, "sha256:") {
		t.Fatalf("hashes differ for reordered schemas: %s %s", ha, hb)
	}
	b.InputSchema = json.RawMessage(`{"type":"object","required":["company_id"],"properties":{"company_id":{"type":"integer"}}}`)
	if hc, _ := SchemaHash(&b); hc == ha {
		t.Fatal("a changed schema kept its hash")
	}
	// A stated hash that is right is accepted.
	a.SchemaHash = ha
	if ps := problems(t, []toolplane.Definition{a}, Options{Bindings: deployment}); ps != nil {
		t.Fatalf("a correct schema_hash was refused: %v", ps)
	}
}

func build(t *testing.T, defs ...toolplane.Definition) *Registry {
	t.Helper()
	r, _, err := Build(defs, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuildFillsDefaultsAndMapsNames(t *testing.T) {
	t.Parallel()
	r := build(t, base(), readDef())
	tool, ok := r.ByModelName("", "crm_update_company")
	if !ok || tool.Def.Name != "crm.update_company" {
		t.Fatalf("reverse map: %v %v", tool, ok)
	}
	if _, ok := r.ByModelName("", "crm.update_company"); ok {
		t.Fatal("a platform name resolved as a model-facing name")
	}
	d := tool.Def
	if d.Timeout.Std() != DefaultTimeout || d.Mode != toolplane.ModeSync || d.Retry != toolplane.RetryNone || !strings.HasPrefix(d.SchemaHash, "sha256:") {
		t.Fatalf("defaults not filled: %+v", d)
	}
	if len(r.Tools("")) != 2 || r.Tools("")[0].Def.Name != "crm.search_people" {
		t.Fatal("tools not sorted by name")
	}
}

func TestOversizedBatchIsRefusedWhole(t *testing.T) {
	t.Parallel()
	d := base()
	d.BatchArgument, d.MaxBatchSize = "ids", 2
	tool, _ := build(t, d).Get("", "crm.update_company")
	tests := []struct {
		args string
		want bool
	}{
		{`{"company_id":"c","ids":["a","b"]}`, false},
		{`{"company_id":"c"}`, false},
		{`{"company_id":"c","ids":["a","b","c"]}`, true},
	}
	for _, tt := range tests {
		args, _ := DecodeArguments([]byte(tt.args))
		args, _, refusal := tool.Arguments(args)
		if refusal != nil {
			t.Fatalf("%s: %+v", tt.args, refusal.Error)
		}
		r := tool.CheckBatch(args)
		if (r != nil) != tt.want {
			t.Fatalf("%s: batch refusal = %v, want %v", tt.args, r, tt.want)
		}
		if r != nil && (r.Error.Code != toolplane.CodeBatchTooLarge || r.Error.FieldPath != "/ids" || !strings.Contains(r.Error.Message, "at most 2")) {
			t.Fatalf("batch refusal = %+v", r.Error)
		}
	}
}

func TestArgumentsAnswerInvalidInput(t *testing.T) {
	t.Parallel()
	tool, _ := build(t, base()).Get("", "crm.update_company")
	args, refusal := DecodeArguments([]byte(`{"company_id": 5,`))
	if refusal == nil || refusal.Error.Code != toolplane.CodeInvalidInput || !refusal.Error.Retryable {
		t.Fatalf("invalid JSON: %v %+v", args, refusal)
	}
	args, _ = DecodeArguments([]byte(`{"company_id": 5}`))
	_, _, refusal = tool.Arguments(args)
	if refusal == nil || refusal.Error.FieldPath != "/company_id" || refusal.Error.Constraint != "type" {
		t.Fatalf("refusal = %+v", refusal)
	}
}

func TestHandlerOffSchemaIsInvalidOutput(t *testing.T) {
	t.Parallel()
	tool, _ := build(t, base()).Get("", "crm.update_company")
	r, vs := tool.Output(map[string]any{"ok": "yes"})
	if r.OK || r.Error.Code != toolplane.CodeInvalidOutput || r.Error.Retryable || len(vs) != 1 || vs[0].FieldPath != "/ok" {
		t.Fatalf("result = %+v violations = %+v", r, vs)
	}
	if strings.Contains(r.Error.Message, "yes") {
		t.Fatal("the model-facing message repeats the tool's off-contract answer")
	}
}

func TestOutputIsValidatedBeforeTheBoundaryChangesItsForm(t *testing.T) {
	t.Parallel()
	// minItems holds for the handler's answer; the bounded form has fewer
	// items and is still delivered, marked truncated.
	d := readDef()
	d.OutputSchema = json.RawMessage(`{"type":"array","minItems":5,"items":{"type":"object","required":["id"]}}`)
	d.MaxResults = 2
	tool, _ := build(t, d).Get("", "crm.search_people")
	rows := []any{}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		rows = append(rows, map[string]any{"id": id})
	}
	r, vs := tool.Output(rows)
	if !r.OK || len(vs) > 0 || !r.Meta.Truncated || r.Meta.Count == nil || *r.Meta.Count != 2 {
		t.Fatalf("result = %+v %v", r, vs)
	}
	if r, _ := tool.Output(rows[:4]); r.OK {
		t.Fatal("an answer breaking minItems was delivered")
	}
}

func TestOutputRedactsCredentials(t *testing.T) {
	t.Parallel()
	d := base()
	d.OutputSchema = json.RawMessage(`{"type":"object"}`)
	tool, _ := build(t, d).Get("", "crm.update_company")
	r, _ := tool.Output(map[string]any{"ok": true, "api_key": "sk-live-123", "nested": []any{map[string]any{"password": "hunter2"}}})
	b, _ := json.Marshal(r.Data)
	if strings.Contains(string(b), "sk-live-123") || strings.Contains(string(b), "hunter2") {
		t.Fatalf("credential reached the result: %s", b)
	}
}

// TestAnHTTPReadRetriesByDefault: a read the platform makes itself is
// safe to repeat within its deadline, unless it says retry: none; a
// write never is.
func TestAnHTTPReadRetriesByDefault(t *testing.T) {
	t.Parallel()
	httpDef := func(name string, effect toolplane.Effect, retry toolplane.Retry) toolplane.Definition {
		d := base()
		d.Name, d.Effect, d.Retry, d.Connection = name, effect, retry, "crm"
		if !effect.Writes() {
			d.Repeatable = nil
		}
		d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://crm.example/companies/{company_id}"}}
		return d
	}
	handlerRead := readDef()
	r, _, err := Build([]toolplane.Definition{
		httpDef("crm.read_default", toolplane.EffectRead, ""),
		httpDef("crm.read_once", toolplane.EffectRead, toolplane.RetryNone),
		httpDef("crm.write_default", toolplane.EffectWrite, ""),
		handlerRead,
	}, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]toolplane.Retry{
		"crm.read_default": toolplane.RetrySafe, "crm.read_once": toolplane.RetryNone,
		"crm.write_default": toolplane.RetryNone, handlerRead.Name: toolplane.RetryNone,
	} {
		tool, ok := r.Get("org-a", name)
		if !ok || tool.Def.Retry != want {
			t.Errorf("%s: retry %q, want %q", name, tool.Def.Retry, want)
		}
	}
}

// TestPublishingRefusesSQLThatMakesCode proves a SQL tool that creates a
// function, procedure, trigger or event is refused at registration: the
// code it makes is a quoted body the statement check cannot read, which
// another tool could then call (the route to the server's files through
// CREATE FUNCTION ... pg_read_file). A plain change publishes.
func TestPublishingRefusesSQLThatMakesCode(t *testing.T) {
	t.Parallel()
	sqlDef := func(stmt string) toolplane.Definition {
		d := base()
		d.Name, d.Connection = "crm.sql_tool", "warehouse"
		d.Binding = toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: stmt}}
		return d
	}
	for _, tc := range []struct{ stmt, want string }{
		{`CREATE FUNCTION f() RETURNS text LANGUAGE sql AS 'SELECT pg_read_file(''PG_VERSION'')'`, "CREATE FUNCTION"},
		{`CREATE OR REPLACE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'COPY t TO PROGRAM ''id''' END $$`, "CREATE PROCEDURE"},
		{`CREATE TRIGGER t BEFORE UPDATE ON companies FOR EACH ROW SET NEW.name = 'x'`, "CREATE TRIGGER"},
		{`CREATE EVENT e ON SCHEDULE EVERY 1 MINUTE DO DELETE FROM companies`, "CREATE EVENT"},
		{`DO 'BEGIN PERFORM 1; END'`, "DO runs"},
		{`UPDATE companies SET name = :filter WHERE id = :company_id`, ""},
	} {
		ps := problems(t, []toolplane.Definition{sqlDef(tc.stmt)}, Options{Bindings: deployment})
		if tc.want == "" {
			if len(ps) != 0 {
				t.Errorf("%s: problems %v", tc.stmt, ps)
			}
			continue
		}
		found := false
		for _, p := range ps {
			found = found || p.Field == "binding.sql.statement" && strings.Contains(p.Message, tc.want)
		}
		if !found {
			t.Errorf("%s: problems %v, want one saying %q", tc.stmt, ps, tc.want)
		}
	}
}
