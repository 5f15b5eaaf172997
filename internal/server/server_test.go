package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/upstream"
)

// readCreds answers the keys first start wrote to dir.
func readCreds(t testing.TB, dir string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

// send POSTs body to base+path with key and answers the status and body.
// It calls no t method, so a goroutine may use it.
func send(base, path, key, body string) (int, string, error) {
	req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// post is send for the test's own goroutine.
func post(t *testing.T, base, path, key, body string) (int, string) {
	t.Helper()
	status, got, err := send(base, path, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, got
}

// bearer adds an API key to every request an MCP client sends.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// slowUpstream is an MCP server on loopback with one tool, hold, that
// answers only when release is closed, and that records the client
// version each session reported.
type slowUpstream struct {
	url      string
	started  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	versions []string
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	t.Helper()
	u := &slowUpstream{started: make(chan struct{}, 1), release: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.versions = append(u.versions, req.Session.InitializeParams().ClientInfo.Version)
		}})
	mcp.AddTool(srv, &mcp.Tool{Name: "hold", Description: "Answers when the test lets it."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case u.started <- struct{}{}:
			default:
			}
			<-u.release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held and released"}}}, nil, nil
		})
	hs := serveLoopback(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	u.url = hs
	return u
}

// serveLoopback serves h on loopback until the test ends and answers its URL.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// running is a demo server New built over a slow upstream, served by Run
// until stop.
type running struct {
	s            *Server
	cfg          Config
	up           *slowUpstream
	base         string
	agent, admin string
	// out is the server's Stdout, read only after Run returned.
	out  *bytes.Buffer
	stop context.CancelFunc
	ran  chan error
}

// start builds cfg on a fresh database with the demo and the slow
// upstream (its hold tool as relax says), runs it, and grants the demo
// agent the upstream's tools.
func start(t *testing.T, cfg Config, relax upstream.Relax) *running {
	t.Helper()
	dir := t.TempDir()
	r := &running{up: newSlowUpstream(t), out: &bytes.Buffer{}, ran: make(chan error, 1)}
	cfg.Addr, cfg.Database, cfg.Demo, cfg.Stdout = "127.0.0.1:0", filepath.Join(dir, "toolplane.db"), true, r.out
	cfg.Upstreams = []upstream.Config{{Slug: "slow", URL: r.up.url, Tools: map[string]upstream.Relax{"hold": relax}}}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.s, r.cfg, r.base = s, cfg, "http://"+s.Addr()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	r.stop = stop
	go func() { r.ran <- s.Run(ctx) }()
	creds := readCreds(t, dir)
	r.agent, r.admin = creds["TOOLPLANE_DEMO_AGENT_KEY"], creds["TOOLPLANE_ADMIN_KEY"]
	if r.agent == "" || r.admin == "" {
		t.Fatalf("first start wrote %v", creds)
	}
	if status, got := post(t, r.base, "/v1/grants", r.admin, `{"agent_id":"demo-agent","pattern":"mcp.slow.*"}`); status != http.StatusCreated {
		t.Fatalf("grant: %d %s", status, got)
	}
	return r
}

// stopWhileHeld ends Run's context once the upstream holds a call, checks
// that Run waits for it, releases it, and waits for Run to return nil.
func (r *running) stopWhileHeld(t *testing.T) {
	t.Helper()
	select {
	case <-r.up.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
	r.stop()
	select {
	case err := <-r.ran:
		t.Fatalf("Run returned (%v) with a call in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(r.up.release)
	select {
	case err := <-r.ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return")
	}
}

// auditWait bounds how long a test waits for audit events the background
// writer stores after their calls answered.
const auditWait = 30 * time.Second

// awaitAudit reads the audit trail with read until done holds of what it
// read, or auditWait passes, and answers what it read last. A call that
// changed nothing answers before its audit event is stored (a background
// writer stores it, within milliseconds, or later on a loaded machine), so
// a test that reads the trail once after such calls races that writer.
func awaitAudit(t *testing.T, read func() []toolplane.AuditEvent, done func([]toolplane.AuditEvent) bool) []toolplane.AuditEvent {
	t.Helper()
	deadline := time.Now().Add(auditWait)
	for {
		events := read()
		if done(events) || time.Now().After(deadline) {
			return events
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// audit answers the outcomes of tool's audit events, newest first, read
// from the database after the server closed it.
func (r *running) audit(t *testing.T, tool string) []string {
	t.Helper()
	b, err := backend.Open(context.Background(), r.cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	events, _, err := b.Store.ListAudit(context.Background(), DefaultOrganization, toolplane.AuditFilter{Tool: tool}, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, e := range events {
		outcomes = append(outcomes, e.Outcome)
	}
	return outcomes
}

// The server New builds answers REST and MCP on the address it bound, and
// Run's end waits for the call in flight, then stores what it queued.
func TestNewServesBothDoorsAndStopsGracefully(t *testing.T) {
	t.Parallel()
	no := false
	r := start(t, Config{Version: "v0.0.0-servertest"}, upstream.Relax{Effect: toolplane.EffectRead, RequiresApproval: &no})
	if strings.HasSuffix(r.base, ":0") {
		t.Fatalf("Addr answers %s, not the bound port", r.s.Addr())
	}
	// REST.
	if status, got := post(t, r.base, "/v1/tools/demo.add_note/invoke", r.agent, `{"arguments":{"ticket_id":"t-1001","text":"Shipped."},"run_id":"run-1"}`); status != 200 || !strings.Contains(got, `"ok":true`) {
		t.Fatalf("REST call: %d %s", status, got)
	}
	// MCP: the session reports the configured version, as the upstream
	// client did to the upstream.
	client := mcp.NewClient(&mcp.Implementation{Name: "servertest", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{r.agent}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP initialize: %v", err)
	}
	if got := cs.InitializeResult().ServerInfo.Version; got != r.cfg.Version {
		t.Errorf("MCP server version %q, want %q", got, r.cfg.Version)
	}
	cs.Close()
	r.up.mu.Lock()
	versions := append([]string(nil), r.up.versions...)
	r.up.mu.Unlock()
	if len(versions) == 0 || versions[0] != r.cfg.Version {
		t.Errorf("the upstream client reported versions %q, want %q", versions, r.cfg.Version)
	}

	// A call in flight when Run's context ends still answers.
	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		status, body, err := send(r.base, "/v1/tools/mcp.slow.hold/invoke", r.agent, `{"arguments":{},"run_id":"run-2"}`)
		answered <- answer{status, body, err}
	}()
	r.stopWhileHeld(t)
	if a := <-answered; a.err != nil || a.status != 200 || !strings.Contains(a.body, "held and released") {
		t.Errorf("the call in flight at shutdown answered %d %s %v", a.status, a.body, a.err)
	}
	if got := r.out.String(); !strings.Contains(got, "toolplane serving ") || !strings.HasSuffix(got, "toolplane stopped\n") {
		t.Errorf("stdout:\n%s", got)
	}
	if c, err := net.DialTimeout("tcp", r.s.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the listener still accepts after Run returned")
	}
	// The audit events queued off the hot path were stored before the
	// database closed.
	for _, tool := range []string{"demo.add_note", "mcp.slow.hold"} {
		if got := r.audit(t, tool); len(got) != 1 || got[0] != "ok" {
			t.Errorf("%s: audit outcomes %q, want one ok", tool, got)
		}
	}
	if err := r.s.Run(context.Background()); !errors.Is(err, ErrRun) {
		t.Errorf("a second Run answered %v, want ErrRun", err)
	}
}

// A Config field that cannot be used is named, and a bad one found before
// anything is opened leaves no database behind.
func TestNewRefusesABadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		field   string
		message string
		opens   bool
	}{
		{"issuer alone", Config{JWTIssuer: "https://issuer.example"}, "JWTIssuer", "JWTIssuer needs JWTAudience and JWTJWKSURL", false},
		{"issuer without keys", Config{JWTIssuer: "https://issuer.example", JWTAudience: "toolplane"}, "JWTIssuer", "JWTIssuer needs JWTAudience and JWTJWKSURL", false},
		{"negative heartbeat", Config{Heartbeat: -time.Second}, "Heartbeat", "Heartbeat: -1s is negative (zero takes the default)", false},
		{"negative sweep", Config{SweepEvery: -time.Second}, "SweepEvery", "SweepEvery: -1s is negative (zero takes the default)", false},
		{"sign-in without an issuer", Config{SignInClientID: "toolplane"}, "SignInClientID", "SignInClientID needs JWTIssuer", false},
		{"negative session idle timeout", Config{SessionIdleTimeout: -time.Second}, "SessionIdleTimeout", "SessionIdleTimeout: -1s is negative", false},
		{"profiles on a bad address", Config{PprofAddr: "127.0.0.1:99999"}, "PprofAddr", "PprofAddr: listen tcp", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := tt.cfg
			cfg.Addr, cfg.Database = "127.0.0.1:0", filepath.Join(dir, "toolplane.db")
			s, err := New(context.Background(), cfg)
			if err == nil {
				s.Close()
				t.Fatal("New accepted it")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.HasPrefix(err.Error(), tt.message) {
				t.Fatalf("New: %v (%T), want a ConfigError on %s: %s", err, err, tt.field, tt.message)
			}
			if _, err := os.Stat(cfg.Database); tt.opens == os.IsNotExist(err) {
				t.Errorf("database file: %v; opened: want %v", err, tt.opens)
			}
		})
	}
	// A flag parser names its flags instead of the fields.
	ce := &ConfigError{Field: "JWTIssuer", Needs: []string{"JWTAudience", "JWTJWKSURL"}}
	flag := func(f string) string { return "--" + strings.ToLower(f) }
	if got := ce.Describe(flag); got != "--jwtissuer needs --jwtaudience and --jwtjwksurl" {
		t.Errorf("Describe: %q", got)
	}
	neg := &ConfigError{Field: "Heartbeat", Err: ErrNegative}
	if !errors.Is(neg, ErrNegative) {
		t.Error("a ConfigError does not wrap its cause")
	}
}

// Definitions that fail registration's checks are listed on Stderr and
// answered as a DefinitionsError wrapping the registry's CheckError.
func TestNewRefusesToolsWithoutAHandler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stderr bytes.Buffer
	_, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), ToolsDir: "../../examples/tools", Stderr: &stderr})
	var de *DefinitionsError
	var ce *registry.CheckError
	if !errors.As(err, &de) || !errors.As(err, &ce) || len(ce.Problems) == 0 {
		t.Fatalf("New: %v (%T), want a DefinitionsError", err, err)
	}
	if !strings.Contains(stderr.String(), "no handler is registered") || !strings.Contains(err.Error(), "tool definition problem(s)") {
		t.Errorf("stderr %q; error %q", stderr.String(), err)
	}
}

// Close releases a server that never ran: its address is free again and
// its database opens for another server.
func TestCloseWithoutRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db")}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrRun) {
		t.Errorf("Run after Close answered %v, want ErrRun", err)
	}
	cfg.Addr = addr
	again, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a second server on the first's address and database: %v", err)
	}
	again.Close()
}

// A job the background work holds when Run's context ends finishes: an
// approved call running in the background completes, it is not cancelled.
func TestRunFinishesTheJobsInHand(t *testing.T) {
	t.Parallel()
	// An upstream tool waits for a person by default.
	r := start(t, Config{}, upstream.Relax{})
	status, got := post(t, r.base, "/v1/tools/mcp.slow.hold/invoke", r.agent, `{"arguments":{},"run_id":"run-1"}`)
	var filed struct {
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if status != http.StatusAccepted || json.Unmarshal([]byte(got), &filed) != nil || filed.Approval.ID == "" {
		t.Fatalf("call: %d %s", status, got)
	}
	if status, got := post(t, r.base, "/v1/approvals/"+filed.Approval.ID+"/approve", r.admin, ""); status != http.StatusOK {
		t.Fatalf("approve: %d %s", status, got)
	}
	r.stopWhileHeld(t)
	if got := r.audit(t, "mcp.slow.hold"); len(got) == 0 || got[0] != "ok" {
		t.Errorf("the approved call's audit outcomes, newest first: %q; want it ok", got)
	}
}

// Close while Run serves shuts the server down, and Run answers nil.
func TestCloseWhileRunning(t *testing.T) {
	t.Parallel()
	s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(t.TempDir(), "toolplane.db")})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + s.Addr() + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never answered: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run after Close: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("Run did not return after Close")
	}
}
