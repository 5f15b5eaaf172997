package browsertest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// The TypeScript MCP SDK's OAuth client provider (testdata/sdkclient.mjs)
// reaches /mcp by its URL alone: the person signs in with their key and
// approves in a real browser, the SDK takes the code at its loopback
// callback, lists tools and calls one acting for the person; after the
// person revokes the consent, the next call is refused and the SDK asks
// for a new authorization.
func TestTypeScriptSDKConnectsThroughTheBrowserFlow(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := startSDKClient(t, s, "")
	sam := s.mint(t, "person", "sam")
	for _, g := range []string{`{"agent_id":"oauth-clients","pattern":"demo.search_tickets"}`, `{"user_id":"sam","pattern":"demo.search_tickets"}`} {
		s.must(t, "POST", "/v1/grants", s.admin, g, http.StatusCreated)
	}
	b := newBrowser(t)

	approveInBrowser(t, b, awaitAuthorizationURL(t, c.out, 0), sam, nil)
	awaitOutput(t, c.out, "CONNECTED")
	if got := c.command(t, "list"); !strings.Contains(got, `"name":"demo_search_tickets"`) || strings.Contains(got, "demo_add_note") {
		t.Fatalf("tools shown to the SDK: %s", got)
	}
	if got := c.command(t, `call demo_search_tickets {"query":"cracked"}`); !strings.HasPrefix(got, "OK ") || strings.Contains(got, `"isError":true`) {
		t.Fatalf("the call acting for sam: %s", got)
	}
	s.awaitOAuthAudit(t, "sam")

	consents := s.must(t, "GET", "/v1/oauth/consents", sam, "", http.StatusOK)
	list, _ := consents["consents"].([]any)
	if len(list) != 1 {
		t.Fatalf("sam's consents: %v", consents)
	}
	id, _ := list[0].(map[string]any)["id"].(string)
	s.must(t, "POST", "/v1/oauth/consents/"+id+"/revoke", sam, "", http.StatusOK)
	// The call is refused: the SDK, told 401 and refused a refresh, sends
	// sam through the browser again.
	c.send(t, `call demo_search_tickets {"query":"cracked"}`)
	awaitAuthorizationURL(t, c.out, 1)
}

// A token narrowed to one tool (scope tool:demo.search_tickets, ticked on
// the consent page) calling
// another gets the step-up challenge from the real authorization server's
// token: 403 insufficient_scope naming the tool's scope; the SDK's next
// authorization asks for that scope, the person approves it in the
// browser, and the call goes through.
func TestStepUpAgainstTheAuthorizationServer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := startSDKClient(t, s, "")
	sam := s.mint(t, "person", "sam")
	for _, g := range []string{`{"agent_id":"oauth-clients","pattern":"demo.*"}`, `{"user_id":"sam","pattern":"demo.*"}`} {
		s.must(t, "POST", "/v1/grants", s.admin, g, http.StatusCreated)
	}
	b := newBrowser(t)

	// The SDK asks the scope the resource metadata offers ("tools"); sam
	// narrows the consent to one tool by ticking it.
	approveInBrowser(t, b, awaitAuthorizationURL(t, c.out, 0), sam, []string{"demo.search_tickets"})
	awaitOutput(t, c.out, "CONNECTED")
	if got := c.command(t, `call demo_search_tickets {"query":"cracked"}`); !strings.HasPrefix(got, "OK ") || strings.Contains(got, `"isError":true`) {
		t.Fatalf("the consented tool: %s", got)
	}

	// The narrowed token itself, calling another tool: 403 with the scope.
	token := strings.Trim(strings.TrimPrefix(c.command(t, "token"), "OK "), `"`)
	req, _ := http.NewRequest("POST", s.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_add_note","arguments":{"ticket_id":"t-1001","text":"Shipped."}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope"`) || !strings.Contains(challenge, `scope="tool:demo.add_note"`) ||
		!strings.Contains(challenge, `resource_metadata="`+s.base+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("the narrowed token calling demo.add_note: %d %q", resp.StatusCode, challenge)
	}

	// Through the SDK: it meets the same 403 and tries to widen its scope.
	// SDK 1.32 first refreshes, which keeps the consented scope (a refresh
	// never widens one), meets the 403 again and gives up: the call fails.
	if got := c.command(t, `call demo_add_note {"ticket_id":"t-1001","text":"Shipped."}`); !strings.HasPrefix(got, "ERR ") || !strings.Contains(got, "403") {
		t.Fatalf("demo_add_note with the narrowed token: %s", got)
	}
	// Without the refresh token the SDK authorizes anew, for a scope that
	// admits the tool (its 401 path asks the metadata's "tools", the
	// whole set); sam approves, and the call goes through.
	c.command(t, "forget")
	c.send(t, `call demo_add_note {"ticket_id":"t-1001","text":"Shipped."}`)
	wider := awaitAuthorizationURL(t, c.out, 1)
	if u, _ := url.Parse(wider); u.Query().Get("scope") != "tools" && !strings.Contains(u.Query().Get("scope"), "tool:demo.add_note") {
		t.Fatalf("the step-up authorization asks scope %q", u.Query().Get("scope"))
	}
	approveInBrowser(t, b, wider, "", nil)
	if got := c.answer(t, 5); !strings.HasPrefix(got, "OK ") || strings.Contains(got, `"isError":true`) {
		t.Fatalf("demo_add_note after the step-up: %s", got)
	}
}

// sdkClient is testdata/sdkclient.mjs running against a server.
type sdkClient struct {
	in  io.Writer
	out *syncbuf.Buffer
}

// startSDKClient starts the SDK client for s's /mcp, asking scope when
// it is not "", and stops it when the test ends. Without Node 22 or the
// SDK the test is skipped, or fails under CI.
func startSDKClient(t *testing.T, s *server, scope string) *sdkClient {
	t.Helper()
	cache := ciCache()
	sdk := os.Getenv("TOOLPLANE_TEST_MCP_SDK")
	if sdk == "" {
		sdk = filepath.Join(cache, "npm", "node_modules", "@modelcontextprotocol", "sdk")
	}
	if _, err := os.Stat(filepath.Join(sdk, "dist", "esm", "client", "auth.js")); err != nil {
		missing(t, "the MCP TypeScript SDK is not installed at "+sdk+" (run .ci/run once, or set TOOLPLANE_TEST_MCP_SDK)")
	}
	node := node22(t, cache)
	script, err := filepath.Abs(filepath.Join("testdata", "sdkclient.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{script, sdk, s.base + "/mcp"}
	if scope != "" {
		args = append(args, scope)
	}
	cmd := exec.Command(node, args...)
	c := &sdkClient{out: &syncbuf.Buffer{}}
	stderr := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = c.out, stderr
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the SDK client's output:\n%s\n%s", c.out.String(), stderr.String())
		}
	})
	return c
}

// send writes one command.
func (c *sdkClient) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		t.Fatal(err)
	}
}

// answers are the lines the client answered commands with so far.
func (c *sdkClient) answers() []string {
	var got []string
	for _, l := range strings.Split(c.out.String(), "\n") {
		if strings.HasPrefix(l, "OK ") || strings.HasPrefix(l, "ERR ") {
			got = append(got, l)
		}
	}
	return got
}

// answer waits for the nth answer (counted from 1) and answers it.
func (c *sdkClient) answer(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		if got := c.answers(); len(got) >= n {
			return got[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer #%d within %v:\n%s", n, stepTimeout, c.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command sends line and answers its answer.
func (c *sdkClient) command(t *testing.T, line string) string {
	t.Helper()
	n := len(c.answers())
	c.send(t, line)
	return c.answer(t, n+1)
}
