package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/upstream"
)

// The clients most people drive an MCP server with are not toolplane's:
// the TypeScript SDK (behind most applications and mcp-remote) and the MCP
// Inspector's CLI. Both validate a result against the tool's output schema
// unless it is an error, so these tests run them, from npm, against the
// door. They need Node 22 or later and the packages .ci/run installs under
// $HOME/.cache/toolplane-ci (or TOOLPLANE_CI_CACHE); without them they
// skip, saying what is missing.

// nodeClients finds Node (22 or later) and the installed clients.
type nodeClients struct {
	node string
	// sdk is the node_modules holding @modelcontextprotocol/sdk; inspector
	// the Inspector's launcher script ("" when not installed).
	sdk, inspector string
}

func findNodeClients(t *testing.T) nodeClients {
	t.Helper()
	cache := os.Getenv("TOOLPLANE_CI_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "toolplane-ci")
	}
	var c nodeClients
	// The Node 22 the conformance run installs, else the one on PATH.
	candidates, _ := filepath.Glob(filepath.Join(cache, "inspector", "node_modules", "node-linux-*", "bin", "node"))
	more, _ := filepath.Glob(filepath.Join(cache, "conformance", "node_modules", "node-linux-*", "bin", "node"))
	candidates = append(candidates, more...)
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
		if major >= 22 {
			c.node = p
			break
		}
	}
	if c.node == "" {
		t.Skip("no Node 22 or later (on PATH or under " + cache + ", where .ci/run installs it); run .ci/run once to install the MCP clients")
	}
	c.sdk = filepath.Join(cache, "npm", "node_modules")
	if _, err := os.Stat(filepath.Join(c.sdk, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("the TypeScript SDK is not installed under " + c.sdk + "; run .ci/run once to install it")
	}
	c.inspector = filepath.Join(cache, "inspector", "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(c.inspector); err != nil {
		c.inspector = ""
	}
	return c
}

// clientAnswer is what a client printed of one tools/call.
type clientAnswer struct {
	IsError    bool           `json:"isError"`
	Text       string         `json:"text"`
	Meta       map[string]any `json:"meta"`
	Structured any            `json:"structured"`
}

// tsCall makes one tools/call with the TypeScript SDK's client, in a
// session of its own.
func (c nodeClients) tsCall(t *testing.T, url, key, tool, args, meta string) clientAnswer {
	t.Helper()
	script, _ := filepath.Abs("testdata/ts_call.cjs")
	cmd := exec.CommandContext(t.Context(), c.node, script, url, key, tool, args, meta)
	cmd.Env = append(os.Environ(), "NODE_PATH="+c.sdk)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client failed on %s: %v\n%s", tool, err, stderr.String())
	}
	var a clientAnswer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("the TypeScript client printed %q: %v", out, err)
	}
	return a
}

// inspectorCall makes one tools/call with the Inspector's CLI, which prints
// the result as JSON.
func (c nodeClients) inspectorCall(t *testing.T, url, key, tool string, args, meta map[string]string) clientAnswer {
	t.Helper()
	argv := []string{c.inspector, "--cli", url, "--transport", "http", "--method", "tools/call", "--tool-name", tool, "--header", "Authorization: Bearer " + key}
	for k, v := range args {
		argv = append(argv, "--tool-arg", k+"="+v)
	}
	for k, v := range meta {
		argv = append(argv, "--tool-metadata", k+"="+v)
	}
	cmd := exec.CommandContext(t.Context(), c.node, argv...)
	// Its catalogue and settings go to a directory of the test's own.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// It prints an error result as any other and exits 5 ("the tool
	// returned isError"); anything else is a failure of the client.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 5) {
		t.Fatalf("the Inspector CLI failed on %s: %v\nstdout: %s\nstderr: %s", tool, err, out, stderr.String())
	}
	var r struct {
		IsError    bool             `json:"isError"`
		Content    []map[string]any `json:"content"`
		Meta       map[string]any   `json:"_meta"`
		Structured any              `json:"structuredContent"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the Inspector CLI printed %q: %v", out, err)
	}
	a := clientAnswer{IsError: r.IsError, Meta: r.Meta, Structured: r.Structured}
	for _, b := range r.Content {
		if s, ok := b["text"].(string); ok {
			a.Text += s
		}
	}
	return a
}

// approvalOf answers the approval id an answer names, checking that the
// text and the structured details agree.
func approvalOf(t *testing.T, client string, a clientAnswer) string {
	t.Helper()
	details, _ := a.Meta["toolplane/approval"].(map[string]any)
	id, _ := details["id"].(string)
	if !a.IsError || id == "" || !strings.Contains(a.Text, id) || details["expires_at"] == nil || details["status"] != "pending" {
		t.Fatalf("%s was not shown an approval: %+v", client, a)
	}
	if !strings.Contains(a.Text, `"toolplane/authorized_by"`) || !strings.Contains(a.Text, "https://toolplane.example/console/approvals/"+id) {
		t.Errorf("%s: the text does not say where the person answers and what to do next: %s", client, a.Text)
	}
	return id
}

// A call that waits for a person reaches the model through the TypeScript
// SDK and the Inspector, though the tool declares an output schema: the
// answer is an error result carrying the approval's id, expiry, address
// and the instruction, with the details in _meta.
func TestApprovalIsShownByTheTypeScriptSDKAndTheInspector(t *testing.T) {
	t.Parallel()
	clients := findNodeClients(t)
	url, key, _ := demoDoor(t, "https://toolplane.example")
	refund := map[string]string{"order_id": "o-502", "amount_cents": "1250", "reason": "charged twice"}
	refundJSON := `{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"}`

	approvalOf(t, "the TypeScript SDK", clients.tsCall(t, url, key, "demo_refund_order", refundJSON, ""))
	if clients.inspector == "" {
		t.Log("the Inspector is not installed under the CI cache; run .ci/run once to install it")
	} else {
		approvalOf(t, "the Inspector", clients.inspectorCall(t, url, key, "demo_refund_order", refund, nil))
	}

}

// The round trip those clients make, each call in a session of its own: a
// retry before the approval is told it still waits for the same approval
// (nothing new is filed), and after a person approves, the call naming the
// approval gets the refund's result, which the client validates against
// the output schema, run once whichever client asks.
func TestApprovalRoundTripWithTheTypeScriptSDKAndTheInspector(t *testing.T) {
	t.Parallel()
	clients := findNodeClients(t)
	url, key, iv := demoDoor(t, "https://toolplane.example")
	refund := map[string]string{"order_id": "o-502", "amount_cents": "1250", "reason": "charged twice"}
	refundJSON := `{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"}`

	id := approvalOf(t, "the TypeScript SDK", clients.tsCall(t, url, key, "demo_refund_order", refundJSON, ""))
	again := clients.tsCall(t, url, key, "demo_refund_order", refundJSON, "")
	if got := approvalOf(t, "the TypeScript SDK, again", again); got != id || !strings.Contains(again.Text, "Still waiting for approval "+id) {
		t.Fatalf("a retry in a new session was answered approval %s: %s; want still waiting for %s", got, again.Text, id)
	}
	if clients.inspector != "" {
		if got := approvalOf(t, "the Inspector", clients.inspectorCall(t, url, key, "demo_refund_order", refund, nil)); got != id {
			t.Fatalf("the Inspector was answered approval %s, want %s", got, id)
		}
	}

	if _, err := iv.Resolve(t.Context(), id, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	done := clients.tsCall(t, url, key, "demo_refund_order", refundJSON, `{"toolplane/authorized_by":"`+id+`"}`)
	if done.IsError || done.Structured == nil || !strings.Contains(done.Text, `"remaining_cents":0`) || strings.Contains(done.Text, `"replayed":true`) {
		t.Fatalf("after the approval the TypeScript SDK got %+v; want the refund's result", done)
	}
	if clients.inspector != "" {
		again := clients.inspectorCall(t, url, key, "demo_refund_order", refund, map[string]string{"toolplane/authorized_by": id})
		if again.IsError || !strings.Contains(again.Text, `"replayed":true`) {
			t.Fatalf("the Inspector, calling again with the approval, got %+v; want the refund's result replayed", again)
		}
	}
	// The approval's own execution finds the refund made.
	r, err := iv.ExecuteApproved(t.Context(), "org-1", id)
	if err != nil || !r.OK || !r.Meta.Replayed {
		t.Fatalf("the approval's execution after the clients' = %+v, %v; want the stored result", r, err)
	}
}

// upstreamBindings binds the tools of the upstreams in set.
type upstreamBindings struct {
	*handler.Registry
	set *upstream.Set
}

func (b upstreamBindings) Connection(id string) bool { return b.set.Connection(id) }
func (upstreamBindings) FactResolver(string) bool    { return false }

// An upstream's tools wait for approval like any write, on /mcp and on the
// upstream's governed copy: the TypeScript SDK shows the approval for
// server-everything's echo (no output schema) and get-structured-content
// (an output schema), on both endpoints. It runs where server-everything
// is installed (TOOLPLANE_TEST_EVERYTHING, as .ci/run sets it).
func TestApprovalOfAnUpstreamToolIsShownByTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	clients := findNodeClients(t)
	entry := os.Getenv("TOOLPLANE_TEST_EVERYTHING")
	if entry == "" {
		t.Skip("set TOOLPLANE_TEST_EVERYTHING to server-everything's dist/index.js (.ci/run installs it) to run the upstream approvals")
	}
	ctx := t.Context()
	store := sqlitetest.New(t)
	quiet := slog.New(slog.DiscardHandler)
	set, err := upstream.New([]upstream.Config{{Slug: "everything", Command: []string{clients.node, entry, "stdio"}}}, upstream.Options{Logger: quiet, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	reg, _, err := registry.Build(nil, registry.Options{Bindings: upstreamBindings{hs, set}})
	if err != nil {
		t.Fatal(err)
	}
	set.UseRegistry(reg)
	set.Start(context.Background(), 20*time.Second)
	t.Cleanup(set.Close)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Remotes: set, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Tools: []string{"mcp.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	key := apikey.Key(id, secret)
	door := &mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, store), Version: "test", Upstreams: set, PublicURL: "https://toolplane.example"}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door.Handler())
	mux.Handle("/mcp/everything", door.UpstreamHandler("everything"))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, c := range []struct{ path, tool, args string }{
		{"/mcp", "mcp_everything_echo", `{"message":"hello"}`},
		{"/mcp", "mcp_everything_get-structured-content", `{"location":"Chicago"}`},
		{"/mcp/everything", "echo", `{"message":"hello"}`},
		{"/mcp/everything", "get-structured-content", `{"location":"Chicago"}`},
	} {
		approvalOf(t, "the TypeScript SDK on "+c.path+" calling "+c.tool, clients.tsCall(t, srv.URL+c.path, key, c.tool, c.args, ""))
	}
}

// tsSession is one session of the TypeScript SDK's client, driven a
// request at a time (testdata/ts_session.cjs).
type tsSession struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

// tsSessionAnswer is what the client printed of one request.
type tsSessionAnswer struct {
	clientAnswer
	Tools []struct {
		Name     string `json:"name"`
		ReadOnly bool   `json:"readOnly"`
	} `json:"tools"`
	Error string `json:"error"`
}

// tsOpen opens a session of the TypeScript SDK's client with key.
func (c nodeClients) tsOpen(t *testing.T, url, key string) *tsSession {
	t.Helper()
	script, _ := filepath.Abs("testdata/ts_session.cjs")
	cmd := exec.CommandContext(t.Context(), c.node, script, url, key)
	cmd.Env = append(os.Environ(), "NODE_PATH="+c.sdk)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = in.Write([]byte(`{"end":true}` + "\n"))
		in.Close()
		if err := cmd.Wait(); err != nil && t.Context().Err() == nil {
			t.Errorf("the TypeScript client ended: %v\n%s", err, stderr.String())
		}
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	return &tsSession{t: t, in: in, out: sc}
}

// do sends one request and answers what the client printed of it.
func (s *tsSession) do(req map[string]any) tsSessionAnswer {
	s.t.Helper()
	b, _ := json.Marshal(req)
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
	if !s.out.Scan() {
		s.t.Fatalf("the TypeScript client printed nothing for %s: %v", b, s.out.Err())
	}
	var a tsSessionAnswer
	if err := json.Unmarshal(s.out.Bytes(), &a); err != nil {
		s.t.Fatalf("the TypeScript client printed %q: %v", s.out.Bytes(), err)
	}
	if a.Error != "" {
		s.t.Fatalf("the TypeScript client refused the answer to %s: %s", b, a.Error)
	}
	return a
}

func (s *tsSession) call(name string, args any) tsSessionAnswer {
	s.t.Helper()
	return s.do(map[string]any{"call": name, "arguments": args})
}

// The meta-tool mode through the TypeScript SDK's client, in one session:
// it is listed the three meta-tools, finds the refund tool, reads its
// declaration, calls it through call_tool and is shown the approval, and
// after a person approves, the same call answers the refund made and a
// call again the refund replayed. A tool its key is not granted is
// neither found nor described nor called, and answers as one that does
// not exist.
func TestMetaToolModeWithTheTypeScriptSDK(t *testing.T) {
	t.Parallel()
	clients := findNodeClients(t)
	f := newMetaDoor(t, false)
	s := clients.tsOpen(t, f.url, f.key(t, toolplane.ListingMeta, 0))

	var names []string
	for _, tl := range s.do(map[string]any{"list": true}).Tools {
		names = append(names, tl.Name)
		if tl.ReadOnly != (tl.Name != "call_tool") {
			t.Errorf("%s: readOnlyHint %v", tl.Name, tl.ReadOnly)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, metaNames) {
		t.Fatalf("the TypeScript SDK was listed %v, want exactly %v", names, metaNames)
	}
	found := s.call("find_tools", map[string]any{"query": "refund an order", "limit": 3})
	matches, _ := found.Structured.(map[string]any)["matches"].([]any)
	if found.IsError || len(matches) == 0 || matches[0].(map[string]any)["name"] != "demo_refund_order" || !strings.Contains(found.Text, "demo_refund_order") {
		t.Fatalf("find_tools = %+v", found)
	}
	desc := s.call("describe_tool", map[string]any{"name": "demo_refund_order"})
	if decl, _ := desc.Structured.(map[string]any); desc.IsError || decl["name"] != "demo_refund_order" || !strings.Contains(desc.Text, `"order_id"`) {
		t.Fatalf("describe_tool = %+v", desc)
	}

	refund := map[string]any{"name": "demo_refund_order", "arguments": map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}}
	id := approvalOf(t, "the TypeScript SDK through call_tool", s.call("call_tool", refund).clientAnswer)
	if _, err := f.iv.Resolve(t.Context(), id, approval.Decision{Approve: true}, f.approver); err != nil {
		t.Fatal(err)
	}
	done := s.call("call_tool", refund)
	if done.IsError || !strings.Contains(done.Text, `"remaining_cents":0`) || strings.Contains(done.Text, `"replayed":true`) {
		t.Fatalf("call_tool after the approval = %+v; want the refund made", done)
	}
	again := s.call("call_tool", refund)
	if again.IsError || !strings.Contains(again.Text, `"replayed":true`) {
		t.Fatalf("call_tool once more = %+v; want the refund replayed", again)
	}
	if r, err := f.iv.ExecuteApproved(t.Context(), "org-1", id); err != nil || !r.OK || !r.Meta.Replayed {
		t.Fatalf("the approval's own execution = %+v, %v; want the refund already made", r, err)
	}

	search := s.call("find_tools", map[string]any{"query": "count the characters, words and sentences of a text"})
	if strings.Contains(search.Text, "demo_analyze_text") {
		t.Fatalf("find_tools found the ungranted tool: %s", search.Text)
	}
	for _, c := range []struct {
		tool string
		args func(name string) any
	}{
		{"describe_tool", func(name string) any { return map[string]any{"name": name} }},
		{"call_tool", func(name string) any { return map[string]any{"name": name, "arguments": map[string]any{"text": "a b"}} }},
	} {
		ungranted, missing := s.call(c.tool, c.args("demo_analyze_text")), s.call(c.tool, c.args("demo_nothing_here"))
		if !ungranted.IsError || strings.ReplaceAll(ungranted.Text, "demo_analyze_text", "N") != strings.ReplaceAll(missing.Text, "demo_nothing_here", "N") {
			t.Errorf("%s: the ungranted tool answers %q, a missing one %q; want the same", c.tool, ungranted.Text, missing.Text)
		}
	}
}
