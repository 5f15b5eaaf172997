package facts_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/facts"
)

// BenchmarkResolve is the cost a call pays for the facts its tool
// declares: three built-in facts, each under its own deadline.
func BenchmarkResolve(b *testing.B) {
	f := facts.Builtin(facts.Config{})
	d := &toolplane.Definition{Name: "payments.refund", Version: "1.0.0", SchemaHash: "h1", Tags: []string{"finance"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"card":{"type":"string","x-sensitive":true}}}`),
		PolicyFacts: []string{facts.OrgTime, facts.ToolTags, facts.SensitiveArguments}}
	inv := &toolplane.Invocation{OrganizationID: "org", AgentID: "agent"}
	args := map[string]any{"card": "4111"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Resolve(ctx, inv, d, args); err != nil {
			b.Fatal(err)
		}
	}
}
