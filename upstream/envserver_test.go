package upstream_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// envServerVar, set to 1, makes this test binary a stdio MCP server with
// one tool, env, answering the environment it was started with.
const envServerVar = "TOOLPLANE_ENV_SERVER"

func envServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "env", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "env", Description: "Answer the server's environment."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return fail(err)
	}
	return 0
}

// A stdio server is started with a few of toolplane's variables (PATH and
// the like) and those its env names, never the rest of toolplane's
// environment: the server answers a model, and toolplane's environment
// holds toolplane's secrets.
func TestStdioServerGetsOnlyItsEnvironment(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv("TOOLPLANE_TEST_OPERATOR_SECRET", "op-secret-4f1d")
	t.Setenv("TOOLPLANE_TEST_GIVEN", "given-9c2e")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil, upstream.Config{Slug: "env", Command: []string{exe, "-test.run=^$"},
		Env:   map[string]string{envServerVar: "1", "GIVEN": "${TOOLPLANE_TEST_GIVEN}"},
		Tools: map[string]upstream.Relax{"env": {Effect: toolplane.EffectRead, RequiresApproval: no()}}})
	eventually(t, "the tool ingested", func() bool { _, ok := e.reg.Get("", "mcp.env.env"); return ok })

	inv := e.inv("run-1")
	inv.Principal.Tools = []string{"mcp.env.env"}
	r, err := e.iv.InvokeJSON(e.ctx, "mcp.env.env", []byte(`{}`), inv)
	if err != nil || !r.OK {
		t.Fatalf("env: %+v %+v, %v", r, r.Error, err)
	}
	got, _ := json.Marshal(r.Data)
	text := string(got)
	if strings.Contains(text, "op-secret-4f1d") || strings.Contains(text, "TOOLPLANE_TEST_OPERATOR_SECRET") {
		t.Errorf("the server saw a variable of toolplane's environment its env does not name:\n%s", text)
	}
	if !strings.Contains(text, "GIVEN=given-9c2e") {
		t.Errorf("the server did not get the variable its env names:\n%s", text)
	}
	if os.Getenv("PATH") != "" && !strings.Contains(text, "PATH=") {
		t.Errorf("the server did not get PATH:\n%s", text)
	}
}
