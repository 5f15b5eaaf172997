package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// mcp-remote, a client nobody here wrote, reaches /mcp by its URL alone:
// it meets the 401, discovers toolplane's authorization server, registers,
// and prints the authorization URL; the person signs in at it with their
// key in a real browser, approves on the consent page, and mcp-remote
// takes the code at its own loopback callback. Through it the person's
// agent lists tools and makes a call acting for them; once the person
// revokes the consent, the next call is refused.
func TestMCPRemoteConnectsThroughTheBrowserFlow(t *testing.T) {
	t.Parallel()
	node, proxy := mcpRemote(t, "proxy.js")
	s := startServer(t)
	sam := s.mint(t, "person", "sam")
	for _, g := range []string{`{"agent_id":"oauth-clients","pattern":"demo.search_tickets"}`, `{"user_id":"sam","pattern":"demo.search_tickets"}`} {
		s.must(t, "POST", "/v1/grants", s.admin, g, http.StatusCreated)
	}
	b := newBrowser(t)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, proxy, s.base+"/mcp", "--allow-http")
	// BROWSER=true: the opener "succeeds" and opens nothing; the test's
	// Chromium visits the URL mcp-remote prints instead.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "BROWSER=true")
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mcp-remote's output:\n%s", stderr.String())
		}
	})

	authURL := awaitAuthorizationURL(t, stderr, 0)
	if !strings.HasPrefix(authURL, s.base+"/oauth/authorize?") {
		t.Fatalf("mcp-remote was sent to %s, not toolplane's authorization endpoint", authURL)
	}
	approveInBrowser(t, b, authURL, sam, nil)
	// mcp-remote has its code at the callback; the browser shows its page.
	awaitOutput(t, stderr, "Proxy established successfully")

	rpc := newStdioRPC(t, stdin, stdout)
	rpc.call(t, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "browsertest", "version": "1"}})
	rpc.notify(t, "notifications/initialized")
	listed := rpc.call(t, "tools/list", map[string]any{})
	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(listed.Result, &tools); err != nil || listed.Error != nil {
		t.Fatalf("tools/list: %s %s", listed.Result, listed.Error)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if fmt.Sprint(names) != "[demo_search_tickets]" {
		t.Fatalf("tools shown through mcp-remote: %v, want only demo_search_tickets", names)
	}
	called := rpc.call(t, "tools/call", map[string]any{"name": "demo_search_tickets", "arguments": map[string]any{"query": "cracked"}})
	if called.Error != nil || strings.Contains(string(called.Result), `"isError":true`) {
		t.Fatalf("the call acting for sam: %s %s", called.Result, called.Error)
	}
	// The audit names the agent, the person and the consent.
	s.awaitOAuthAudit(t, "sam")

	// sam revokes the consent; the next call is refused, and mcp-remote
	// has to send sam through the browser again.
	consents := s.must(t, "GET", "/v1/oauth/consents", sam, "", http.StatusOK)
	list, _ := consents["consents"].([]any)
	if len(list) != 1 {
		t.Fatalf("sam's consents: %v", consents)
	}
	id, _ := list[0].(map[string]any)["id"].(string)
	s.must(t, "POST", "/v1/oauth/consents/"+id+"/revoke", sam, "", http.StatusOK)
	again := make(chan rpcAnswer, 1)
	go func() {
		again <- rpc.callAsync("tools/call", map[string]any{"name": "demo_search_tickets", "arguments": map[string]any{"query": "cracked"}})
	}()
	// Refused: either the call answers an error, or mcp-remote, told 401,
	// prints a new authorization URL for sam and holds the call.
	deadline := time.After(stepTimeout)
	for {
		select {
		case a := <-again:
			if a.Error == nil && !strings.Contains(string(a.Result), `"isError":true`) {
				t.Fatalf("a call after the revocation went through: %s", a.Result)
			}
			return
		case <-time.After(200 * time.Millisecond):
			if len(authorizationURLRE.FindAllString(stderr.String(), -1)) > 1 {
				return
			}
		case <-deadline:
			t.Fatalf("the call after the revocation was neither refused nor sent to sign in again within %v", stepTimeout)
		}
	}
}

// awaitOAuthAudit waits for the audit event of an OAuth client's call of
// demo.search_tickets, written apart from the call, and fails unless it
// names the agent, the person and the consent.
func (s *server) awaitOAuthAudit(t *testing.T, person string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ev := s.must(t, "GET", "/v1/audit/events?tool=demo.search_tickets&outcome=ok", s.admin, "", http.StatusOK)
		if items, _ := ev["items"].([]any); len(items) > 0 {
			e, _ := items[0].(map[string]any)
			if key, _ := e["key_id"].(string); e["agent_id"] != "oauth-clients" || e["user_id"] != person || !strings.HasPrefix(key, "oauth:") {
				t.Fatalf("the call's audit event: %v", e)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit event of the call within %v", stepTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// approveInBrowser visits the authorization URL in the browser, signs in
// with the person's key (key "": the browser is signed in already), ticks tools (none: every tool) and allows.
func approveInBrowser(t *testing.T, b *browser, authURL, key string, tools []string) {
	t.Helper()
	if key == "" {
		b.open(t, authURL, "button[value=allow]")
	} else {
		b.open(t, authURL, "#key")
		b.do(t, "paste the person's key", chromedp.SendKeys(chromedp.CSS("#key"), key))
		if got := b.submit(t, "form button[type=submit]"); got != http.StatusOK {
			t.Fatalf("signing in from the authorization request answered %d\n%s", got, b.describe())
		}
	}
	b.waitFor(t, "the consent page", `!!document.querySelector('button[value=allow]')`)
	for _, tool := range tools {
		b.do(t, "tick "+tool, chromedp.Click(chromedp.CSS(`input[name=tool][value="`+tool+`"]`)))
	}
	b.checkCSP(t)
	if got := b.submit(t, "button[value=allow]"); got != http.StatusOK {
		t.Fatalf("allowing answered %d at the client's callback\n%s", got, b.describe())
	}
}

// authorizationURLRE matches the URL mcp-remote (and the SDK script) print
// to send the person to.
var authorizationURLRE = regexp.MustCompile(`(?m)^(http://127\.0\.0\.1:\d+/oauth/authorize\?\S+)$`)

// awaitAuthorizationURL waits until out has printed more than n
// authorization URLs and answers the (n+1)th.
func awaitAuthorizationURL(t *testing.T, out *syncbuf.Buffer, n int) string {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		if m := authorizationURLRE.FindAllStringSubmatch(out.String(), -1); len(m) > n {
			return m[n][1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no authorization URL #%d printed within %v:\n%s", n+1, stepTimeout, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitOutput waits until out shows want.
func awaitOutput(t *testing.T, out *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not printed within %v:\n%s", want, stepTimeout, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stdioRPC speaks JSON-RPC, a message a line, to a stdio MCP server.
type stdioRPC struct {
	in     io.Writer
	lines  chan []byte
	nextID int
}

// rpcAnswer is one JSON-RPC response.
type rpcAnswer struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func newStdioRPC(t *testing.T, in io.Writer, out io.Reader) *stdioRPC {
	r := &stdioRPC{in: in, lines: make(chan []byte, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			r.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(r.lines)
	}()
	return r
}

func (r *stdioRPC) send(msg map[string]any) error {
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = r.in.Write(append(raw, '\n'))
	return err
}

func (r *stdioRPC) notify(t *testing.T, method string) {
	t.Helper()
	if err := r.send(map[string]any{"jsonrpc": "2.0", "method": method}); err != nil {
		t.Fatal(err)
	}
}

// callAsync sends a request and answers its response, or an answer with
// an error when the stream ends first.
func (r *stdioRPC) callAsync(method string, params any) rpcAnswer {
	r.nextID++
	id := r.nextID
	if err := r.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return rpcAnswer{Error: json.RawMessage(strconv.Quote(err.Error()))}
	}
	for line := range r.lines {
		var a rpcAnswer
		if json.Unmarshal(line, &a) == nil && a.ID == id && (a.Result != nil || a.Error != nil) {
			return a
		}
	}
	return rpcAnswer{Error: json.RawMessage(`"the stream ended"`)}
}

func (r *stdioRPC) call(t *testing.T, method string, params any) rpcAnswer {
	t.Helper()
	done := make(chan rpcAnswer, 1)
	go func() { done <- r.callAsync(method, params) }()
	select {
	case a := <-done:
		return a
	case <-time.After(stepTimeout):
		t.Fatalf("%s: no answer within %v", method, stepTimeout)
		return rpcAnswer{}
	}
}

// mcpRemote answers Node 22 or later and the named script of mcp-remote
// (TOOLPLANE_TEST_MCP_REMOTE's directory, else where .ci/run installs
// it). Without them the test is skipped, or fails under CI.
func mcpRemote(t *testing.T, script string) (node, path string) {
	t.Helper()
	chromium(t)
	cache := ciCache()
	path = filepath.Join(cache, "mcp-remote", "node_modules", "mcp-remote", "dist", script)
	if dir := os.Getenv("TOOLPLANE_TEST_MCP_REMOTE"); dir != "" {
		path = filepath.Join(filepath.Dir(dir), script)
	}
	if _, err := os.Stat(path); err != nil {
		missing(t, "mcp-remote is not installed at "+path+" (run .ci/run once, or set TOOLPLANE_TEST_MCP_REMOTE to its dist/client.js)")
	}
	return node22(t, cache), path
}

// ciCache answers where .ci/run installs the Node clients.
func ciCache() string {
	if c := os.Getenv("TOOLPLANE_CI_CACHE"); c != "" {
		return c
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "toolplane-ci")
}

// node22 answers a Node 22 or later: the one .ci/run installs beside the
// inspector, or node on PATH.
func node22(t *testing.T, cache string) string {
	t.Helper()
	candidates, _ := filepath.Glob(filepath.Join(cache, "*", "node_modules", "node-linux-*", "bin", "node"))
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		if major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0]); major >= 22 {
			return p
		}
	}
	missing(t, "no Node 22 or later on PATH or under "+cache)
	return ""
}

// missing skips the test for why, or fails it under CI, where every
// client is installed.
func missing(t *testing.T, why string) {
	t.Helper()
	if inCI() {
		t.Fatal(why + " (under CI every client must run)")
	}
	t.Skip(why)
}
