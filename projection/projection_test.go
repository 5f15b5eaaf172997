package projection

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

func def(effect toolplane.Effect, out string) *toolplane.Definition {
	return &toolplane.Definition{
		Name: "payments.refund_order", Version: "2.1.0", Description: "Refund an order.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(out),
		Effect:       effect,
		Annotations:  toolplane.Annotations{Destructive: effect != toolplane.EffectRead, Idempotent: true, RequiresApproval: true},
	}
}

func TestProjectMCP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		d               *toolplane.Definition
		wantJSONContain []string
		wantNot         []string
	}{
		{"destructive write", def(toolplane.EffectWrite, `{"type":"object"}`),
			[]string{`"name":"payments_refund_order"`, `"destructiveHint":true`, `"readOnlyHint":false`, `"idempotentHint":true`, `"openWorldHint":false`, `"outputSchema":{"type":"object"}`, `"toolplane/name":"payments.refund_order"`, `"toolplane/requires_approval":true`, `"inputSchema":{"type":"object"`},
			nil},
		{"read with an array answer", def(toolplane.EffectRead, `{"type":"array"}`),
			[]string{`"readOnlyHint":true`},
			[]string{`destructiveHint`, `outputSchema`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(MCP(tt.d))
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			for _, w := range tt.wantJSONContain {
				if !strings.Contains(s, w) {
					t.Errorf("MCP projection %s lacks %s", s, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(s, w) {
					t.Errorf("MCP projection %s should not carry %s", s, w)
				}
			}
		})
	}
}

func TestProjectProviders(t *testing.T) {
	t.Parallel()
	d := def(toolplane.EffectWrite, `{"type":"object"}`)
	o, _ := json.Marshal(OpenAI(d))
	if want := `{"type":"function","function":{"name":"payments_refund_order","description":"Refund an order.","parameters":{"type":"object","properties":{"order_id":{"type":"string"}}}}}`; string(o) != want {
		t.Errorf("OpenAI = %s\nwant    %s", o, want)
	}
	a, _ := json.Marshal(Anthropic(d))
	if want := `{"name":"payments_refund_order","description":"Refund an order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}}}}`; string(a) != want {
		t.Errorf("Anthropic = %s\nwant      %s", a, want)
	}
}

func TestSchemaStripsVendorKeywords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"no vendor keyword is unchanged", `{"type":"object",  "properties":{"a":{"type":"string"}}}`, `{"type":"object",  "properties":{"a":{"type":"string"}}}`},
		{"top level", `{"type":"object","x-coerce":true}`, `{"type":"object"}`},
		{"in properties, items and combinators",
			`{"type":"object","properties":{"n":{"type":"integer","x-coerce":true},"l":{"type":"array","items":{"type":"string","x-vendor":{"a":1}}},"u":{"anyOf":[{"type":"string","x-a":1},{"type":"null"}]}},"$defs":{"d":{"x-b":2,"type":"number"}},"additionalProperties":{"x-c":3}}`,
			`{"$defs":{"d":{"type":"number"}},"additionalProperties":{},"properties":{"l":{"items":{"type":"string"},"type":"array"},"n":{"type":"integer"},"u":{"anyOf":[{"type":"string"},{"type":"null"}]}},"type":"object"}`},
		{"a property named x- is data, not a keyword",
			`{"type":"object","properties":{"x-request-id":{"type":"string"}},"required":["x-request-id"]}`,
			`{"type":"object","properties":{"x-request-id":{"type":"string"}},"required":["x-request-id"]}`},
		{"values are data", `{"enum":["x-a"],"default":{"x-b":1},"x-c":1}`, `{"default":{"x-b":1},"enum":["x-a"]}`},
		{"not JSON is unchanged", `{"x-`, `{"x-`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(Schema(json.RawMessage(tt.in))); got != tt.want {
				t.Errorf("Schema(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestProjectionsShowNoVendorKeywordsNorContentSchema(t *testing.T) {
	t.Parallel()
	d := def(toolplane.EffectWrite, ContentSchema)
	d.Kind = toolplane.KindMCP
	d.Binding.Remote = &toolplane.RemoteBinding{ConnectionID: "up", RemoteName: "refund"}
	d.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","x-coerce":true}}}`)
	for name, v := range map[string]any{"mcp": MCP(d), "openai": OpenAI(d), "anthropic": Anthropic(d)} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "x-coerce") || strings.Contains(string(b), "structuredContent") {
			t.Errorf("%s projection shows what the model should not see: %s", name, b)
		}
	}
	if OutputSchema(d) != nil {
		t.Errorf("the content schema of a remote tool is shown: %s", OutputSchema(d))
	}
	// The server's own schema is shown.
	d.OutputSchema = json.RawMessage(`{"type":"object","x-v":1}`)
	if got := string(MCP(d).OutputSchema.(json.RawMessage)); got != `{"type":"object"}` {
		t.Errorf("declared output schema shown as %s", got)
	}
}

// A tool is shown to a model with its model-facing description: a
// deprecated version says so, and names its sunset and its replacement;
// an active one is described as its definition is.
func TestShownSaysADeprecation(t *testing.T) {
	t.Parallel()
	sunset := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		tool registry.Tool
		want []string
	}{
		{"active", registry.Tool{Def: *def(toolplane.EffectWrite, `{"type":"object"}`), State: toolplane.StateActive}, []string{"Refund an order."}},
		{"deprecated", registry.Tool{Def: *def(toolplane.EffectWrite, `{"type":"object"}`), State: toolplane.StateDeprecated, SunsetAt: sunset,
			Replacement: "payments.refund"}, []string{"Refund an order.", "Deprecated", "2027-01-31", "payments_refund"}},
	}
	for _, tt := range tests {
		got := Shown(&tt.tool)
		for _, w := range tt.want {
			if !strings.Contains(got.Description, w) {
				t.Errorf("%s: description %q lacks %q", tt.name, got.Description, w)
			}
		}
		if tt.tool.State == toolplane.StateActive && got.Description != tt.tool.Def.Description {
			t.Errorf("%s: description %q, want the definition's", tt.name, got.Description)
		}
		if got.Name != "payments_refund_order" {
			t.Errorf("%s: name %q", tt.name, got.Name)
		}
	}
}
