package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/upstream"
)

// A server's tools/list is data toolplane does not control: a tool whose
// input schema would make one validation take seconds is left out when it
// is ingested, and the server's other tools are kept.
func TestIngestionRefusesAnExplodingSchema(t *testing.T) {
	var sent atomic.Int32
	srv, upURL := goUpstream(t, &sent)
	var defs strings.Builder
	defs.WriteString(`"l0":{"type":"string"}`)
	for i := 1; i <= 19; i++ {
		fmt.Fprintf(&defs, `,"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1)
	}
	bomb := json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/l19"}},"$defs":{` + defs.String() + `}}`)
	srv.AddTool(&mcp.Tool{Name: "bomb", Description: "Nested alternatives.", InputSchema: bomb},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
		})
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL})
	eventually(t, "the server's tools to be ingested", func() bool { _, ok := e.reg.Get("org-1", "mcp.up.lookup"); return ok })
	if _, ok := e.reg.Get("org-1", "mcp.up.bomb"); ok {
		t.Fatal("a tool whose schema expands past the bound was ingested")
	}
	r, err := e.call(t, "mcp.up.bomb", `{"x":1}`, "run-1")
	if err == nil && r.OK {
		t.Fatalf("the refused tool answered: %+v", r)
	}
}

// A pattern is data from the server too: a tool whose pattern compiles to a
// program that would cost a thousand steps for every byte of an argument is
// left out when it is ingested, and the server's other tools are kept.
func TestIngestionRefusesAnExpensivePattern(t *testing.T) {
	var sent atomic.Int32
	srv, upURL := goUpstream(t, &sent)
	slow := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","pattern":"[a-z]{1000}b"}}}`)
	srv.AddTool(&mcp.Tool{Name: "slow", Description: "A costly pattern.", InputSchema: slow},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
		})
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL})
	eventually(t, "the server's tools to be ingested", func() bool { _, ok := e.reg.Get("org-1", "mcp.up.lookup"); return ok })
	if _, ok := e.reg.Get("org-1", "mcp.up.slow"); ok {
		t.Fatal("a tool whose pattern compiles past the bound was ingested")
	}
	start := time.Now()
	r, err := e.call(t, "mcp.up.slow", `{"text":"`+strings.Repeat("a", 300_000)+`"}`, "run-1")
	if err == nil && r.OK {
		t.Fatalf("the refused tool answered: %+v", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("calling the refused tool took %v", took)
	}
}
