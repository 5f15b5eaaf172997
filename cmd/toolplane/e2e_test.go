// Package main_test builds the real binary and drives one running
// `toolplane serve --demo` through both doors, REST and MCP, the way an
// operator and an agent would. The unit tests of httpapi and mcpserver wire
// the parts by hand; only this test catches a fault in the wiring of serve
// itself (flags, first start, background work, graceful shutdown).
package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// server is one running toolplane process and the keys its first start
// minted.
type server struct {
	base     string // http://127.0.0.1:port
	admin    string // a person with platform_admin, approver, auditor
	agent    string // the demo agent, granted demo.*
	dir      string
	out, err *syncbuf.Buffer
}

// binDir holds the built binary; it lives outside any test's TempDir
// because every test shares it, and TestMain removes it.
var binDir string

// build compiles the binary once per test process: every test that starts
// a server shares it, and a compile error is reported once.
var build = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolplane-e2e-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "toolplane")
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", bin}
	if raceTest() {
		// A data race in the server then fails the test: the child
		// exits 66 instead of 0 at shutdown.
		args = append(args, "-race")
	}
	cmd := exec.Command(gobin, append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(err.Error() + ": " + string(out))
	}
	return bin, nil
})

// raceTest reports whether this test binary was built with -race.
func raceTest() bool {
	bi, ok := debug.ReadBuildInfo()
	return ok && slices.ContainsFunc(bi.Settings, func(s debug.BuildSetting) bool { return s.Key == "-race" && s.Value == "true" })
}

// TestMain removes the shared binary once every test is done with it.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var servingRE = regexp.MustCompile(`toolplane serving \d+ tool\(s\) on (http://\S+) `)

// start builds (once) and starts `toolplane serve --demo` on a fresh SQLite
// file and a free port, with any extra flags, and registers a cleanup that
// stops it with SIGTERM and checks the shutdown was graceful.
func start(t *testing.T, extra ...string) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin, err := build()
	if err != nil {
		t.Fatalf("go build: %v", err)
	}
	s := &server{dir: t.TempDir(), out: &syncbuf.Buffer{}, err: &syncbuf.Buffer{}}
	cmd := exec.Command(bin, append([]string{"serve", "--demo", "--addr", "127.0.0.1:0",
		"--database", filepath.Join(s.dir, "toolplane.db"), "--data", s.dir}, extra...)...)
	cmd.Stdout, cmd.Stderr = s.out, s.err
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		defer func() {
			if t.Failed() {
				t.Logf("server stdout:\n%s\nserver stderr:\n%s", s.out, s.err)
			}
		}()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("SIGTERM: %v", err)
			return
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("after SIGTERM the server exited with %v; want status 0", err)
			}
			if !strings.Contains(s.out.String(), "toolplane stopped") {
				t.Errorf("the server did not report a graceful stop")
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the server did not stop within 20s of SIGTERM")
		}
	})

	deadline := time.Now().Add(20 * time.Second)
	for s.base == "" {
		if m := servingRE.FindStringSubmatch(s.out.String()); m != nil {
			s.base = m[1]
			break
		}
		select {
		case err := <-exited:
			exited <- err // let the cleanup see it
			t.Fatalf("serve exited before listening: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not report its address within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	file := filepath.Join(s.dir, "credentials.env")
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("credentials.env has mode %v; want 0600: it holds the admin key", info.Mode().Perm())
	}
	creds, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(creds)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "TOOLPLANE_ADMIN_KEY":
			s.admin = v
		case "TOOLPLANE_DEMO_AGENT_KEY":
			s.agent = v
		}
	}
	if s.admin == "" || s.agent == "" {
		t.Fatalf("credentials.env lacks a key:\n%s", creds)
	}

	for {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within 20s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// do sends one REST request with key as the bearer token (none when key is
// empty) and answers the status and body.
func (s *server) do(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// result decodes both shapes the API answers: a tool result
// ({ok, data, error, meta}) and the API's error envelope ({error}); both
// carry the stable code and field path under "error".
type result struct {
	OK    *bool           `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *struct {
		Code       string `json:"code"`
		FieldPath  string `json:"field_path"`
		Retryable  bool   `json:"retryable"`
		Violations []struct {
			FieldPath  string `json:"field_path"`
			Constraint string `json:"constraint"`
		} `json:"violations"`
	} `json:"error"`
	Meta struct {
		Replayed bool   `json:"replayed"`
		Count    *int   `json:"count"`
		UsageID  string `json:"usage_id"`
	} `json:"meta"`
}

// decode fails the test on a body that is not the JSON it expects.
func decode[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// code answers the stable code, or "" for a success.
func (r result) code() string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

func (r result) field() string {
	if r.Error == nil {
		return ""
	}
	return r.Error.FieldPath
}

func (r result) ok() bool { return r.OK != nil && *r.OK }

// invoke calls a tool over REST and decodes the answer.
func (s *server) invoke(t *testing.T, key, tool, body string) (int, result, []byte) {
	t.Helper()
	status, raw := s.do(t, "POST", "/v1/tools/"+tool+"/invoke", key, body)
	if status == http.StatusAccepted {
		return status, result{}, raw
	}
	return status, decode[result](t, raw), raw
}

// pendingApproval is the 202 answer of a call that waits for a person.
type pendingApproval struct {
	Approval struct {
		ID        string    `json:"id"`
		ExpiresAt time.Time `json:"expires_at"`
		Preview   string    `json:"preview"`
	} `json:"approval"`
}

// approvalItem is one entry of GET /v1/approvals.
type approvalItem struct {
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	RunID     string          `json:"run_id"`
	Status    string          `json:"status"`
	Preview   string          `json:"preview"`
	Arguments json.RawMessage `json:"arguments"`
}

func (s *server) approvals(t *testing.T, status string) []approvalItem {
	t.Helper()
	code, raw := s.do(t, "GET", "/v1/approvals?status="+status, s.admin, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/approvals: %d %s", code, raw)
	}
	return decode[struct {
		Items []approvalItem `json:"items"`
	}](t, raw).Items
}

// newAgentKey grants, as the admin, the agent identity subject the
// pattern, and mints it a key narrowed to tools: what the key may call is
// the intersection.
func (s *server) newAgentKey(t *testing.T, subject, pattern string, tools ...string) string {
	t.Helper()
	grant, _ := json.Marshal(map[string]any{"agent_id": subject, "pattern": pattern})
	if status, raw := s.do(t, "POST", "/v1/grants", s.admin, string(grant)); status != http.StatusCreated {
		t.Fatalf("POST /v1/grants: %d %s", status, raw)
	}
	body, _ := json.Marshal(map[string]any{"kind": "agent", "subject": subject, "tools": tools, "label": "e2e"})
	status, raw := s.do(t, "POST", "/v1/keys", s.admin, string(body))
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/keys: %d %s", status, raw)
	}
	key := decode[struct {
		Key string `json:"key"`
	}](t, raw).Key
	if key == "" {
		t.Fatalf("POST /v1/keys answered no key: %s", raw)
	}
	return key
}

// waitForResume waits until the audit trail shows the background job ran
// the approved call, so a repeated call is certain to read its outcome. The
// events are decoded with their keys folded (lower case, no underscores)
// because the endpoint has no declared schema: it renders the store's Go
// field names today.
func (s *server) waitForResume(t *testing.T, approvalID string) {
	t.Helper()
	fold := func(k string) string { return strings.ToLower(strings.ReplaceAll(k, "_", "")) }
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, raw := s.do(t, "GET", "/v1/audit/events?tool=demo.refund_order&outcome=ok", s.admin, "")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/audit/events: %d %s", status, raw)
		}
		for _, ev := range decode[struct {
			Items []map[string]any `json:"items"`
		}](t, raw).Items {
			f := map[string]any{}
			for k, v := range ev {
				f[fold(k)] = v
			}
			// A resume names the approval it runs under; it records the
			// approval as decisive only when it, not a replay, ran the call.
			if f["source"] == "resume" && f["authorizedby"] == approvalID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approved call %s was not executed in the background within 10s", approvalID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bearer adds the API key to every request the MCP client sends.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// connect opens an MCP session with key, closed when the test ends.
func (s *server) connect(t *testing.T, key string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   s.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}},
		MaxRetries: -1, // a refused key must fail now, not after retries
	}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

// mustConnect opens a session the test cannot go on without.
func mustConnect(t *testing.T, s *server, key string) *mcp.ClientSession {
	t.Helper()
	cs, err := s.connect(t, key)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	return cs
}

// callTool calls a tool in the session and decodes the result envelope
// its text carries.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return r, envelopeOf(r)
}

// textOf joins a tool result's text content.
func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// envelopeOf decodes the text of an executed or refused call: the MCP door
// renders the same result envelope the REST API answers, meta included. An
// awaiting-approval answer is prose, and decodes to the zero result.
func envelopeOf(r *mcp.CallToolResult) result {
	var res result
	_ = json.Unmarshal([]byte(textOf(r)), &res)
	return res
}

// TestEndToEnd runs one server for all its subtests: they use distinct
// runs, keys and orders, so they run in parallel against the one process,
// as concurrent agents would.
func TestEndToEnd(t *testing.T) {
	s := start(t)
	// An identity granted the demo tools, through a key narrowed to one
	// read: the intersection, that read, is the stable denial path for
	// every other tool on both doors.
	narrow := s.newAgentKey(t, "e2e-narrow", "demo.*", "demo.search_tickets")

	t.Run("REST", func(t *testing.T) {
		t.Parallel()
		t.Run("tools are listed by grant", func(t *testing.T) {
			t.Parallel()
			names := func(key string) []string {
				status, raw := s.do(t, "GET", "/v1/tools", key, "")
				if status != http.StatusOK {
					t.Fatalf("GET /v1/tools: %d %s", status, raw)
				}
				var got []string
				for _, tl := range decode[struct {
					Items []struct {
						Name        string         `json:"name"`
						ModelName   string         `json:"model_name"`
						InputSchema map[string]any `json:"input_schema"`
					} `json:"items"`
				}](t, raw).Items {
					if tl.ModelName != strings.ReplaceAll(tl.Name, ".", "_") || tl.InputSchema["type"] != "object" {
						t.Errorf("tool %s: model name %q, input schema %v", tl.Name, tl.ModelName, tl.InputSchema)
					}
					got = append(got, tl.Name)
				}
				slices.Sort(got)
				return got
			}
			if got, want := names(s.agent), []string{"demo.add_note", "demo.analyze_text", "demo.refund_order", "demo.search_tickets"}; !slices.Equal(got, want) {
				t.Errorf("demo agent sees %v; want %v", got, want)
			}
			if got, want := names(narrow), []string{"demo.search_tickets"}; !slices.Equal(got, want) {
				t.Errorf("narrow agent sees %v; want %v", got, want)
			}
			// A tool the key does not grant does not exist for it.
			if status, raw := s.do(t, "GET", "/v1/tools/demo.refund_order", narrow, ""); status != http.StatusNotFound || decode[result](t, raw).code() != "not_found" {
				t.Errorf("narrow agent GET demo.refund_order: %d %s", status, raw)
			}
			status, raw := s.do(t, "GET", "/v1/tools/demo.refund_order", s.agent, "")
			one := decode[struct {
				MCP struct {
					Name        string `json:"name"`
					Annotations struct {
						DestructiveHint *bool `json:"destructiveHint"`
					} `json:"annotations"`
				} `json:"mcp"`
			}](t, raw)
			if status != http.StatusOK || one.MCP.Name != "demo_refund_order" || one.MCP.Annotations.DestructiveHint == nil || !*one.MCP.Annotations.DestructiveHint {
				t.Errorf("GET demo.refund_order: %d %s", status, raw)
			}
		})

		t.Run("refusals carry stable codes", func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name, key, tool, body string
				status                int
				code, field           string
			}{
				{"wrong-typed argument", s.agent, "demo.refund_order",
					`{"arguments":{"order_id":"o-501","amount_cents":"lots","reason":"x"},"run_id":"e2e-rest-refusals"}`,
					http.StatusOK, "invalid_input", "/amount_cents"},
				{"missing argument", s.agent, "demo.add_note",
					`{"arguments":{"ticket_id":"t-1001"},"run_id":"e2e-rest-refusals"}`,
					http.StatusOK, "invalid_input", "/text"},
				{"tool not granted to the key", narrow, "demo.add_note",
					`{"arguments":{"ticket_id":"t-1001","text":"x"},"run_id":"e2e-rest-refusals"}`,
					http.StatusOK, "denied", ""},
				{"read not granted to the key", narrow, "demo.analyze_text",
					`{"arguments":{"text":"x"},"run_id":"e2e-rest-refusals"}`,
					http.StatusOK, "denied", ""},
				{"tool that does not exist", s.agent, "demo.nope",
					`{"arguments":{}}`,
					http.StatusOK, "tool_unavailable", ""},
				{"the handler's own not-found", s.agent, "demo.add_note",
					`{"arguments":{"ticket_id":"t-9999","text":"x"},"run_id":"e2e-rest-refusals"}`,
					http.StatusOK, "not_found", ""},
				{"write without run or idempotency key", s.agent, "demo.add_note",
					`{"arguments":{"ticket_id":"t-1001","text":"x"}}`,
					http.StatusBadRequest, "invalid_request", "run_id"},
				{"unknown body field", s.agent, "demo.search_tickets",
					`{"arguments":{"query":"x"},"runid":"typo"}`,
					http.StatusBadRequest, "invalid_request", ""},
				{"a person's key calls a tool", s.admin, "demo.search_tickets",
					`{"arguments":{"query":"x"}}`,
					http.StatusForbidden, "denied", ""},
				{"invalid key", "tpk_000000000000000000000000_not-a-secret", "demo.search_tickets",
					`{"arguments":{"query":"x"}}`,
					http.StatusUnauthorized, "unauthenticated", ""},
				{"no key", "", "demo.search_tickets",
					`{"arguments":{"query":"x"}}`,
					http.StatusUnauthorized, "unauthenticated", ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					status, res, raw := s.invoke(t, tc.key, tc.tool, tc.body)
					if status != tc.status || res.ok() || res.code() != tc.code || res.field() != tc.field {
						t.Fatalf("got %d %s; want %d code %q field %q", status, raw, tc.status, tc.code, tc.field)
					}
					if tc.code == "invalid_input" && (len(res.Error.Violations) == 0 || res.Error.Violations[0].FieldPath != tc.field || !res.Error.Retryable) {
						t.Errorf("invalid_input without a retryable violation at %s: %s", tc.field, raw)
					}
				})
			}
		})

		t.Run("reads answer with meta", func(t *testing.T) {
			t.Parallel()
			status, res, raw := s.invoke(t, s.agent, "demo.search_tickets", `{"arguments":{"query":"cracked"}}`)
			if status != http.StatusOK || !res.ok() || res.Meta.Count == nil || *res.Meta.Count != 1 || !strings.Contains(string(res.Data), `"t-1001"`) {
				t.Errorf("search: %d %s", status, raw)
			}
			// A metered read is billed: its answer names the usage record.
			status, res, raw = s.invoke(t, s.agent, "demo.analyze_text", `{"arguments":{"text":"One. Two."},"run_id":"e2e-rest-metered"}`)
			if status != http.StatusOK || !res.ok() || res.Meta.UsageID == "" {
				t.Errorf("metered read: %d %s", status, raw)
			}
		})

		t.Run("a repeated write is replayed", func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct{ name, body, other string }{
				{"same run", `{"arguments":{"ticket_id":"t-1002","text":"Address fixed."},"run_id":"e2e-rest-replay"}`, ""},
				// One idempotency key names one action: other arguments
				// under it conflict.
				{"same idempotency key", `{"arguments":{"ticket_id":"t-1002","text":"Invoice resent."},"idempotency_key":"e2e-rest-key-1"}`,
					`{"arguments":{"ticket_id":"t-1002","text":"Something else."},"idempotency_key":"e2e-rest-key-1"}`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					_, first, raw1 := s.invoke(t, s.agent, "demo.add_note", tc.body)
					_, second, raw2 := s.invoke(t, s.agent, "demo.add_note", tc.body)
					if !first.ok() || first.Meta.Replayed {
						t.Fatalf("first call: %s", raw1)
					}
					if !second.ok() || !second.Meta.Replayed || !bytes.Equal(first.Data, second.Data) {
						t.Fatalf("second call is not the first's answer replayed:\n%s\n%s", raw1, raw2)
					}
					if tc.other != "" {
						if _, res, raw := s.invoke(t, s.agent, "demo.add_note", tc.other); res.ok() || res.code() != "conflict" {
							t.Errorf("reused idempotency key with other arguments: %s", raw)
						}
					}
				})
			}
		})

		t.Run("a destructive write waits for a person", func(t *testing.T) {
			t.Parallel()
			call := `{"arguments":{"order_id":"o-501","amount_cents":1000,"reason":"cracked screen"},"run_id":"e2e-rest-refund"}`
			status, _, raw := s.invoke(t, s.agent, "demo.refund_order", call)
			pa := decode[pendingApproval](t, raw)
			if status != http.StatusAccepted || pa.Approval.ID == "" || !pa.Approval.ExpiresAt.After(time.Now()) || !strings.Contains(pa.Approval.Preview, "o-501") {
				t.Fatalf("refund: %d %s; want 202 with an approval", status, raw)
			}
			id := pa.Approval.ID
			// Asking again before anyone answers is the same approval.
			if status, _, raw := s.invoke(t, s.agent, "demo.refund_order", call); status != http.StatusAccepted || decode[pendingApproval](t, raw).Approval.ID != id {
				t.Fatalf("repeat while pending: %d %s; want the same approval %s", status, raw, id)
			}
			if !slices.ContainsFunc(s.approvals(t, "pending"), func(a approvalItem) bool {
				return a.ID == id && a.Tool == "demo.refund_order" && a.RunID == "e2e-rest-refund"
			}) {
				t.Fatalf("approval %s is not listed as pending", id)
			}
			// The agent cannot answer its own approval, nor list approvals.
			if status, raw := s.do(t, "POST", "/v1/approvals/"+id+"/approve", s.agent, ""); status != http.StatusForbidden || decode[result](t, raw).code() != "denied" {
				t.Fatalf("agent approving: %d %s", status, raw)
			}
			if status, raw := s.do(t, "GET", "/v1/approvals", s.agent, ""); status != http.StatusForbidden || decode[result](t, raw).code() != "denied" {
				t.Fatalf("agent listing approvals: %d %s", status, raw)
			}
			if status, raw := s.do(t, "POST", "/v1/approvals/apr_does_not_exist/approve", s.admin, ""); status != http.StatusNotFound || decode[result](t, raw).code() != "not_found" {
				t.Fatalf("approving an unknown id: %d %s", status, raw)
			}
			status, raw = s.do(t, "POST", "/v1/approvals/"+id+"/approve", s.admin, `{"reason":"customer verified"}`)
			if status != http.StatusOK || decode[approvalItem](t, raw).Status != "approved" {
				t.Fatalf("admin approving: %d %s", status, raw)
			}
			if status, raw := s.do(t, "POST", "/v1/approvals/"+id+"/approve", s.admin, ""); status != http.StatusConflict || decode[result](t, raw).code() != "conflict" {
				t.Fatalf("approving twice: %d %s", status, raw)
			}
			// The identical call naming the approval answers the executed
			// refund: run now, or read back from the background job that
			// ran it first (an identical call still running answers 409).
			authorized := strings.Replace(call, `"run_id"`, `"authorized_by":"`+id+`","run_id"`, 1)
			var first result
			for deadline := time.Now().Add(10 * time.Second); ; {
				status, res, raw := s.invoke(t, s.agent, "demo.refund_order", authorized)
				if status == http.StatusConflict && res.code() == "in_flight" && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if status != http.StatusOK || !res.ok() || !strings.Contains(string(res.Data), `"remaining_cents":48900`) {
					t.Fatalf("call after approval: %d %s", status, raw)
				}
				first = res
				break
			}
			// Once executed, the refund is made once: every later identical
			// call, and the background execution, read the same answer.
			s.waitForResume(t, id)
			for _, body := range []string{authorized, call} {
				if status, res, raw := s.invoke(t, s.agent, "demo.refund_order", body); status != http.StatusOK || !res.Meta.Replayed || !bytes.Equal(res.Data, first.Data) {
					t.Fatalf("repeat after execution: %d %s; want %s replayed", status, raw, first.Data)
				}
			}
			if !slices.ContainsFunc(s.approvals(t, "approved"), func(a approvalItem) bool { return a.ID == id }) {
				t.Errorf("approval %s is not listed as approved", id)
			}
		})

		t.Run("a rejected write answers rejected", func(t *testing.T) {
			t.Parallel()
			call := `{"arguments":{"order_id":"o-501","amount_cents":99,"reason":"goodwill"},"run_id":"e2e-rest-reject"}`
			status, _, raw := s.invoke(t, s.agent, "demo.refund_order", call)
			id := decode[pendingApproval](t, raw).Approval.ID
			if status != http.StatusAccepted || id == "" {
				t.Fatalf("refund: %d %s", status, raw)
			}
			if status, raw := s.do(t, "POST", "/v1/approvals/"+id+"/reject", s.admin, `{"reason":"not eligible"}`); status != http.StatusOK || decode[approvalItem](t, raw).Status != "rejected" {
				t.Fatalf("reject: %d %s", status, raw)
			}
			if status, res, raw := s.invoke(t, s.agent, "demo.refund_order", call); status != http.StatusOK || res.ok() || res.code() != "rejected" {
				t.Fatalf("call after rejection: %d %s", status, raw)
			}
		})
	})

	t.Run("MCP", func(t *testing.T) {
		t.Parallel()
		t.Run("only an agent's valid key opens a session", func(t *testing.T) {
			t.Parallel()
			status, raw := s.do(t, "POST", "/mcp", "", `{}`)
			if status != http.StatusUnauthorized {
				t.Errorf("no key: %d %s", status, raw)
			}
			for name, key := range map[string]string{"invalid key": "tpk_000000000000000000000000_not-a-secret", "person's key": s.admin} {
				if _, err := s.connect(t, key); err == nil {
					t.Errorf("%s: the session opened", name)
				}
			}
		})

		t.Run("tools are listed under model-facing names", func(t *testing.T) {
			t.Parallel()
			cs := mustConnect(t, s, s.agent)
			list, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
				schema, _ := tl.InputSchema.(map[string]any)
				if schema["type"] != "object" || schema["properties"] == nil {
					t.Errorf("%s: inputSchema %v", tl.Name, tl.InputSchema)
				}
				if platform := tl.Meta["toolplane/name"]; platform != strings.Replace(tl.Name, "_", ".", 1) {
					t.Errorf("%s: _meta toolplane/name %v", tl.Name, platform)
				}
				if tl.Name == "demo_refund_order" && (tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint || tl.Meta["toolplane/requires_approval"] != true) {
					t.Errorf("demo_refund_order is not declared destructive and approval-bound: %+v %v", tl.Annotations, tl.Meta)
				}
				if tl.Name == "demo_search_tickets" && (tl.Annotations == nil || !tl.Annotations.ReadOnlyHint) {
					t.Errorf("demo_search_tickets is not declared read-only: %+v", tl.Annotations)
				}
			}
			slices.Sort(names)
			if want := []string{"demo_add_note", "demo_analyze_text", "demo_refund_order", "demo_search_tickets"}; !slices.Equal(names, want) {
				t.Errorf("tools/list = %v; want %v", names, want)
			}
		})

		t.Run("a narrow key sees and calls only its grants", func(t *testing.T) {
			t.Parallel()
			cs := mustConnect(t, s, narrow)
			list, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) != 1 || list.Tools[0].Name != "demo_search_tickets" {
				t.Errorf("narrow tools/list: %v", list.Tools)
			}
			r, res := callTool(t, cs, "demo_search_tickets", map[string]any{"query": "twice"})
			if r.IsError || !res.ok() || res.Meta.Count == nil || *res.Meta.Count != 1 {
				t.Errorf("granted read: %s", textOf(r))
			}
			// An ungranted tool is not served to this session at all.
			r, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo_add_note", Arguments: map[string]any{"ticket_id": "t-1001", "text": "x"}})
			if err == nil && !r.IsError {
				t.Errorf("an ungranted tool answered: %s", textOf(r))
			}
		})

		t.Run("a wrong-typed argument is an error result", func(t *testing.T) {
			t.Parallel()
			cs := mustConnect(t, s, s.agent)
			r, res := callTool(t, cs, "demo_refund_order", map[string]any{"order_id": "o-502", "amount_cents": "lots", "reason": "x"})
			if !r.IsError || res.code() != "invalid_input" || res.field() != "/amount_cents" {
				t.Errorf("wrong-typed argument: isError=%v %s", r.IsError, textOf(r))
			}
		})

		t.Run("a write called twice in a session is replayed", func(t *testing.T) {
			t.Parallel()
			cs := mustConnect(t, s, s.agent)
			args := map[string]any{"ticket_id": "t-1003", "text": "Duplicate charge confirmed."}
			r1, first := callTool(t, cs, "demo_add_note", args)
			r2, second := callTool(t, cs, "demo_add_note", args)
			if r1.IsError || !first.ok() || first.Meta.Replayed || r1.StructuredContent == nil {
				t.Fatalf("first call: %s", textOf(r1))
			}
			if r2.IsError || !second.ok() || !second.Meta.Replayed || !bytes.Equal(first.Data, second.Data) {
				t.Fatalf("second call is not the first's answer replayed:\n%s\n%s", textOf(r1), textOf(r2))
			}
			// Another session is another run: the same note is a new action.
			r3, third := callTool(t, mustConnect(t, s, s.agent), "demo_add_note", args)
			if r3.IsError || third.Meta.Replayed || bytes.Equal(first.Data, third.Data) {
				t.Fatalf("a new session replayed the first's note: %s", textOf(r3))
			}
		})

		t.Run("a destructive write waits for a person", func(t *testing.T) {
			t.Parallel()
			cs := mustConnect(t, s, s.agent)
			args := map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}
			r, _ := callTool(t, cs, "demo_refund_order", args)
			id, _ := r.Meta["toolplane/approval_id"].(string)
			if !r.IsError || id == "" || !strings.Contains(textOf(r), id) || r.Meta["toolplane/approval_expires_at"] == nil {
				t.Fatalf("refund: isError=%v meta=%v %s", r.IsError, r.Meta, textOf(r))
			}
			status, raw := s.do(t, "POST", "/v1/approvals/"+id+"/approve", s.admin, "")
			if status != http.StatusOK || decode[approvalItem](t, raw).Status != "approved" {
				t.Fatalf("admin approving: %d %s", status, raw)
			}
			// The approved call runs without the agent asking again; the
			// same call in the same session then answers its result.
			s.waitForResume(t, id)
			r, res := callTool(t, cs, "demo_refund_order", args)
			if r.IsError || !res.ok() || !res.Meta.Replayed || r.StructuredContent == nil ||
				!strings.Contains(string(res.Data), `"remaining_cents":0`) || !strings.Contains(string(res.Data), `"order_id":"o-502"`) {
				t.Fatalf("after approval: isError=%v %s", r.IsError, textOf(r))
			}
			// No approval of this refund is left for a person to answer.
			for _, a := range s.approvals(t, "pending") {
				if a.Tool == "demo.refund_order" && strings.Contains(string(a.Arguments), `"o-502"`) {
					t.Errorf("a pending approval of the executed refund is left: %+v", a)
				}
			}
		})
	})
}
