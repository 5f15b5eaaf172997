package projection

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
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
