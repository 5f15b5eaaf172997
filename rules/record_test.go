package rules

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

// TestRecordBytes pins the exact text of recorded inputs: a shadow run and
// the audit trail read what earlier calls stored, so the same request is
// recorded byte for byte alike however record builds it.
func TestRecordBytes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 22, 30, 0, 123456789, time.UTC)
	zone := time.FixedZone("office", 2*3600)
	def := &toolplane.Definition{Name: "payments.refund_order", Version: "1.0.0", Effect: toolplane.EffectWrite,
		Tags: []string{"pii"}, Classification: "confidential", Owner: "team-payments"}
	type fact struct {
		Account string `json:"account"`
		Limit   int    `json:"limit"`
	}
	tests := []struct {
		name   string
		effect policy.Effect
		in     policy.Input
		want   string
	}{
		{"a read with a fact", policy.Allow, policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-1", Source: toolplane.SourceREST,
				Credential:      &toolplane.Credential{ID: "tpk_agent", Roles: []string{"reader"}},
				AgentAttributes: map[string]any{"department": "support", "team": "ops"}},
			Tool:      def,
			Arguments: map[string]any{"order_id": "ord-7", "amount_cents": json.Number("1200"), "to_account": "acct-customer"},
			Facts:     map[string]any{"order_account": "acct-customer"},
		}, `{"grants":"allow","request":{"principal":{"agent":"agent-1","key":"tpk_agent","roles":["reader"],"team":"ops","attributes":{"department":"support","team":"ops"}},"tool":{"name":"payments.refund_order","version":"1.0.0","effect":"write","destructive":false,"read_only":false,"tags":["pii"],"classification":"confidential","owner":"team-payments","sensitive":[]},"arguments":{"amount_cents":1200,"order_id":"sha256:d31e3f4ed61a764db7b6765da38aa4c3","to_account":"sha256:30a2dde086f1a7e1ad4ef5ad9853fb3c"},"facts":{"order_account":"sha256:30a2dde086f1a7e1ad4ef5ad9853fb3c"},"context":{"time":"2026-12-02T00:30:00.123456789+02:00","hour":0,"weekday":3,"run_cost_cents":250,"source":"rest"}}}`},
		{"nothing but the tool", policy.Deny, policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-2", Source: toolplane.SourceMCP},
			Tool:       &toolplane.Definition{Name: "crm.get", Version: "2.0.0", Effect: toolplane.EffectRead},
		}, `{"grants":"deny","request":{"principal":{"agent":"agent-2","roles":[],"attributes":{}},"tool":{"name":"crm.get","version":"2.0.0","effect":"read","destructive":false,"read_only":true,"tags":[],"sensitive":[]},"arguments":{},"facts":{},"context":{"time":"2026-12-02T00:30:00.123456789+02:00","hour":0,"weekday":3,"run_cost_cents":250,"source":"mcp"}}}`},
		{"a fact resolved to a nil map", policy.Deny, policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-2", Source: toolplane.SourceMCP},
			Tool:       &toolplane.Definition{Name: "crm.get", Version: "2.0.0", Effect: toolplane.EffectRead},
			Facts:      map[string]any{"none": map[string]any(nil), "list": []any{map[string]any(nil)}},
		}, `{"grants":"deny","request":{"principal":{"agent":"agent-2","roles":[],"attributes":{}},"tool":{"name":"crm.get","version":"2.0.0","effect":"read","destructive":false,"read_only":true,"tags":[],"sensitive":[]},"arguments":{},"facts":{"list":[{}],"none":{}},"context":{"time":"2026-12-02T00:30:00.123456789+02:00","hour":0,"weekday":3,"run_cost_cents":250,"source":"mcp"}}}`},
		{"a person with claims", policy.RequireApproval, policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-1", UserID: "user-sam", TenantID: "tenant-a", Source: toolplane.SourceREST,
				AgentRoles:      []string{"a", "b"},
				AgentAttributes: map[string]any{"api_key": "agent-key-7f31", "region": "eu", "a<b>&c": "<i>\u2029</i> & more"},
				User: &toolplane.User{Roles: []string{"finance"}, Groups: []string{"g1", "g2"}, Manager: "user-max",
					Attributes: map[string]any{"access_token": "idp-tok-0193", "level": json.Number("3"), "nested": map[string]any{"x": []any{"y", true, nil}}}}},
			Tool:      def,
			Arguments: map[string]any{},
		}, `{"grants":"require_approval","request":{"principal":{"agent":"agent-1","roles":["a","b"],"tenant":"tenant-a","attributes":{"a\u003cb\u003e\u0026c":"\u003ci\u003e\u2029\u003c/i\u003e \u0026 more","api_key":"[redacted]","region":"eu"}},"user":{"id":"user-sam","roles":["finance"],"groups":["g1","g2"],"manager":"user-max","attributes":{"access_token":"[redacted]","level":3,"nested":{"x":["y",true,null]}}},"tool":{"name":"payments.refund_order","version":"1.0.0","effect":"write","destructive":false,"read_only":false,"tags":["pii"],"classification":"confidential","owner":"team-payments","sensitive":[]},"arguments":{},"facts":{},"context":{"time":"2026-12-02T00:30:00.123456789+02:00","hour":0,"weekday":3,"run_cost_cents":250,"source":"rest"}}}`},
		{"sensitive values copied around", policy.Allow, policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-1", Source: toolplane.SourceREST},
			Tool:       def,
			Sensitive:  []string{"/card/number", "/card/pin", "/items/*/secret"},
			Arguments: map[string]any{
				"card":             map[string]any{"number": "4111111111111111", "pin": json.Number("1234"), "holder": "Ada <ada@example.com> & co"},
				"note":             "card 4111111111111111 please",
				"items":            []any{map[string]any{"secret": "s3cr3t-value", "n": json.Number("1.5")}, map[string]any{"secret": false}, "plain"},
				"4111111111111111": "a key that is the card",
				"token":            "sk_live_abcdefghijklmnopqrstuvwx",
				"empty":            "",
				"marker":           "[redacted]",
				"odd":              "caf\xe9 \u2028 \"quoted\" \\ tab\t",
				"nothing":          nil,
			},
			Facts: map[string]any{"echo": "s3cr3t-value", "struct": fact{Account: "acct-9", Limit: 5}, "texts": map[string]string{"a": "b"},
				"float": 2.5, "list": []any{"x", json.Number("2")}, "when": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		}, `{"grants":"allow","request":{"principal":{"agent":"agent-1","roles":[],"attributes":{}},"tool":{"name":"payments.refund_order","version":"1.0.0","effect":"write","destructive":false,"read_only":false,"tags":["pii"],"classification":"confidential","owner":"team-payments","sensitive":["/card/number","/card/pin","/items/*/secret"]},"arguments":{"[redacted]":"sha256:8802303eb994a60148c110b8a8e47be7","card":{"holder":"sha256:d82964176cf38f042188eb6697396c65","number":"[redacted]","pin":"[redacted]"},"empty":"sha256:e3b0c44298fc1c149afbf4c8996fb924","items":[{"n":1.5,"secret":"[redacted]"},{"secret":"[redacted]"},"sha256:a116c9ed46d6207734a43317d30fd88f"],"marker":"[redacted]","note":"[redacted]","nothing":null,"odd":"sha256:29cd33a8185de72d3c4f6d4ed100cce5","token":"[redacted]"},"facts":{"echo":"[redacted]","float":2.5,"list":["sha256:2d711642b726b04401627ca9fbac32f5",2],"struct":{"account":"sha256:4559d94671eabee39c1252795b55d8e8","limit":5},"texts":{"a":"sha256:3e23e8160039594a33894f6564e1b134"},"when":"sha256:f5edb46c62c1f2dec94af3b4885615ad"},"context":{"time":"2026-12-02T00:30:00.123456789+02:00","hour":0,"weekday":3,"run_cost_cents":250,"source":"rest"}}}`},
		{"too large to keep", policy.Allow, policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-1", Source: toolplane.SourceREST},
			Tool:       def,
			Arguments:  map[string]any{"big": json.Number(strings.Repeat("9", maxInput))},
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := record(tt.effect, policy.NewRequest(tt.in, now, zone, 250))
			if got != tt.want {
				t.Errorf("record =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// BenchmarkRecord measures the document of one decided call and its
// record, as Decide builds them: a read of one item by an agent's key (the
// load generator's http read), the demo's refund with a fact, and a call
// acting for a person with claims and an x-sensitive argument.
func BenchmarkRecord(b *testing.B) {
	now := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC)
	key := &toolplane.Credential{ID: "tpk_agent", Roles: []string{}}
	for _, c := range []struct {
		name string
		in   policy.Input
	}{
		{"get-item", policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "toolplane-load-http", Source: toolplane.SourceREST, Credential: key},
			Tool:       &toolplane.Definition{Name: "load.get_item", Version: "1.0.0", Effect: toolplane.EffectRead, Owner: "load"},
			Arguments:  map[string]any{"id": "item_0042"},
		}},
		{"refund", policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-1", Source: toolplane.SourceREST, Credential: key,
				AgentAttributes: map[string]any{"department": "support"}},
			Tool:      &toolplane.Definition{Name: "demo.refund_order", Version: "1.0.0", Effect: toolplane.EffectWrite, Tags: []string{"finance"}},
			Arguments: map[string]any{"order_id": "ord-7", "amount_cents": json.Number("1200"), "to_account": "acct-customer"},
			Facts:     map[string]any{"order_account": "acct-customer"},
		}},
		{"for-a-person", policy.Input{
			Invocation: &toolplane.Invocation{AgentID: "agent-1", UserID: "user-sam", Source: toolplane.SourceMCP, Credential: key,
				User: &toolplane.User{Groups: []string{"finance"}, Manager: "user-max", Attributes: map[string]any{"region": "eu"}}},
			Tool:      &toolplane.Definition{Name: "payments.pay", Version: "1.0.0", Effect: toolplane.EffectWrite},
			Arguments: map[string]any{"to_account": "acct-evil-7781", "amount_cents": json.Number("100"), "memo": "rent"},
			Sensitive: []string{"/to_account"},
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if record(policy.Allow, policy.NewRequest(c.in, now, time.UTC, 0)) == "" {
					b.Fatal("nothing recorded")
				}
			}
		})
	}
}
