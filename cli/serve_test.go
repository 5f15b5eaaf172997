package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/backend"
)

// syncBuffer is a buffer the server writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeDemoEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "data", "toolplane.db")}, &out, &errOut)
	}()
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	creds, err := os.ReadFile(filepath.Join(dir, "data", "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(dir, "data", "credentials.env")); info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v", info.Mode())
	}
	for file, want := range map[string]os.FileMode{"data": 0o700, "data/toolplane.db": 0o600, "data/toolplane.db-wal": 0o600} {
		info, err := os.Stat(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", file, info.Mode().Perm(), want)
		}
	}
	agent := regexp.MustCompile(`TOOLPLANE_DEMO_AGENT_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	callTool := func(tool, body string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/v1/tools/"+tool+"/invoke", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := func(body string) (int, string) { return callTool("demo.add_note", body) }
	body := `{"arguments":{"ticket_id":"t-1001","text":"Replacement shipped."},"run_id":"run-1"}`
	if status, got := call(body); status != 200 || !strings.Contains(got, `"ok":true`) {
		t.Fatalf("first call: %d %s", status, got)
	}
	if status, got := call(body); status != 200 || !strings.Contains(got, `"replayed":true`) {
		t.Fatalf("second call: %d %s", status, got)
	}
	// A refund waits for a person: the pending gauge counts it.
	if status, got := callTool("demo.refund_order", `{"arguments":{"order_id":"o-501","amount_cents":100,"reason":"damaged"},"run_id":"run-1"}`); status != http.StatusAccepted {
		t.Fatalf("refund: %d %s", status, got)
	}
	// Metrics count the calls by tool and outcome.
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metricsText), `toolplane_tool_calls_total{outcome="ok",tool="demo.add_note"} 2`) ||
		!strings.Contains(string(metricsText), `toolplane_approvals_pending{organization="default"} 1`) {
		t.Fatalf("metrics:\n%s", metricsText)
	}
	// The MCP endpoint is served beside the API, behind the same keys.
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("MCP without a key: %v %v", resp, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "toolplane stopped") {
			t.Fatalf("shutdown: %d %s %s", code, out.String(), errOut.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeRefusesToolsWithoutAHandler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut syncBuffer
	code := serve(context.Background(), []string{"--tools", "../examples/tools", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "no handler is registered") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

func TestFirstStartRefusesAPlantedCredentialsFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := backend.Open(ctx, filepath.Join(dir, "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "elsewhere")
	tests := []struct {
		name  string
		plant func(file string) error
	}{
		{"a file", func(file string) error { return os.WriteFile(file, []byte("x"), 0o644) }},
		{"a symbolic link", func(file string) error { return os.Symlink(target, file) }},
	}
	for i, tt := range tests {
		data := filepath.Join(dir, fmt.Sprint("data", i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := tt.plant(filepath.Join(data, "credentials.env")); err != nil {
			t.Fatal(err)
		}
		if err := firstStart(ctx, b, filepath.Join(dir, "t.db"), data, true, io.Discard); err == nil {
			t.Errorf("%s: first start wrote its keys through what was planted", tt.name)
		}
		if creds, _, _ := b.Store.ListCredentials(ctx, DefaultOrganization, "", 10); len(creds) != 0 {
			t.Errorf("%s: %d credentials stored that nobody holds", tt.name, len(creds))
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target was written: %v", err)
	}
}

func TestFirstStartOnOneDatabaseByManyNodesMintsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "t.db")
	b, err := backend.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = firstStart(ctx, b, db, filepath.Join(dir, fmt.Sprint("node", i)), true, io.Discard)
		}()
	}
	wg.Wait()
	files := 0
	for i := range nodes {
		if errs[i] != nil {
			t.Errorf("node %d: %v", i, errs[i])
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("node", i), "credentials.env")); err == nil {
			files++
		}
	}
	// The nodes that lost stored an admin key before they learned it, and
	// withdrew it: only the winner's keys are valid.
	all, _, _ := b.Store.ListCredentials(ctx, DefaultOrganization, "", 10)
	var valid []string
	for _, c := range all {
		if c.RevokedAt.IsZero() {
			valid = append(valid, c.ID)
		}
	}
	if files != 1 || len(valid) != 2 {
		t.Errorf("%d credentials files and %d valid credentials, want 1 file holding the 2 stored keys", files, len(valid))
	}
	if files == 1 {
		for i := range nodes {
			raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprint("node", i), "credentials.env"))
			if err != nil {
				continue
			}
			for _, id := range valid {
				if !strings.Contains(string(raw), id+"_") {
					t.Errorf("the credentials file lacks the valid key %s", id)
				}
			}
		}
	}
}

// The first start's keys have random ids like any other key: an id nobody
// can guess is an id nobody can present to probe or flood.
func TestFirstStartIDsAreNotPredictable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 2 {
		dir := t.TempDir()
		db := filepath.Join(dir, "t.db")
		b, err := backend.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := firstStart(ctx, b, db, filepath.Join(dir, "data"), true, io.Discard); err != nil {
			t.Fatal(err)
		}
		creds, _, _ := b.Store.ListCredentials(ctx, DefaultOrganization, "", 10)
		if len(creds) != 2 {
			t.Fatalf("database %d: %d credentials", i, len(creds))
		}
		for _, c := range creds {
			if seen[c.ID] || strings.Count(c.ID, "0") > 12 {
				t.Errorf("database %d: the %s key has the id %s, which a reader of the source can guess", i, c.Subject, c.ID)
			}
			seen[c.ID] = true
		}
	}
}

func TestMetricsTokenGuardsMetrics(t *testing.T) {
	t.Parallel()
	h := bearerOnly("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("metrics")) }))
	tests := []struct {
		header string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer s3cret", http.StatusOK},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%q: %d, want %d", tt.header, rec.Code, tt.want)
		}
	}
	// Without a token the handler is open.
	rec := httptest.NewRecorder()
	bearerOnly("", h).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("the open wrapper changed the inner handler's answer: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	bearerOnly("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("an open /metrics refused a scraper: %d", rec.Code)
	}
}
